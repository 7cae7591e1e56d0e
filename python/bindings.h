#pragma once
// What the Python module's files share (python/): a loaded model as Python holds it,
// the errors Python sees, and each file's function that adds its part to the module.
//   module.cpp    the module: errors, threads, and the parts below
//   arguments.cpp text and token ids from Python arguments
//   model.cpp     folio.load, Model (logits, loss, attention, parameters), Tokenizer
//   generate.cpp  Model.generate and Model.stream
//   train.cpp     folio.train (Run is Python, in folio/__init__.py)
//   tensor.cpp    folio.tensor, Tensor and the functional ops: folio's autograd
//   tensor_index.cpp  Tensor.__getitem__: integers and slices, through autograd's slice
//   tensor_inplace.cpp  Tensor's -=, +=, *=, /= in its own storage, and folio.no_grad's switch
//   nn.cpp        folio.nn: the modules Linear, Head, MultiHead and GPT on those tensors
#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/checkpoint.h"

namespace folio::python {

namespace py = pybind11;

// A checkpoint loaded for Python. Shared: the Model object, its streams and every
// parameter view hold it, so a view outlives the Model that handed it out.
struct Loaded {
  ModelCheckpoint ck;  // the model (in eval mode), its tokenizer, step and file
  // One call into the model at a time: Python threads may share a Model, and the GIL
  // is released while it computes.
  std::mutex busy;
};
using LoadedPtr = std::shared_ptr<Loaded>;

// Raised as FileNotFoundError (module.cpp's translator); folio::Error is ValueError.
struct FileMissing : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Raised as TypeError: an argument of the wrong kind (a float array for token ids).
struct WrongType : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Raises KeyboardInterrupt (or whatever a signal handler raised) if a signal came:
// long calls ask between steps, with the GIL taken for the moment of asking.
void check_signals();

// A model's options as a dict, each value of its own Python type: "seed" an int (the
// checkpoint's JSON writes it as a string, since a uint64 may not fit JSON's integers),
// a width such as "ffn_hidden" an int.
py::dict config_dict(const nn::GPTConfig& c);

// A Python object's text as UTF-8 (a str), or TypeError naming `what`.
std::string text_argument(const py::handle& obj, const char* what);
// A path as its bytes on the file system: a str, bytes or any os.PathLike (pathlib.Path),
// as open() takes it; TypeError naming `what` otherwise.
std::string path_argument(const py::handle& obj, const char* what);

// Numbers as Python itself reads them. numpy's and PyTorch's scalars (np.int64,
// np.float32) are not int or float, but an integer one has __index__ and a real one
// __float__, which is what operator.index() and float() use; a str has neither, so text
// is never taken for a number.
// True/False, numpy's included (np.bool_ is no int to Python, though it has __index__).
bool is_bool(const py::handle& obj);
// An int, or what has __index__ (a 0-d integer array too); not np.bool_. A Python bool
// is an int here: callers to whom a bool means something else ask is_bool() first.
std::optional<py::int_> integer_value(const py::handle& obj);
// A seed (of weights, of sampling): an int in [0, 2**64), np.int64 too; not a bool.
// TypeError or ValueError whose message begins with `what`.
uint64_t seed_argument(const py::handle& seed, const char* what);
// An int, a float, or what has __float__ or __index__, as float() gives it.
std::optional<double> real_value(const py::handle& obj);
// An object's type for messages: "int", "list", "int64" (numpy's).
std::string type_name(const py::handle& obj);
// Bytes as a str; a byte that is not part of a UTF-8 character becomes U+FFFD (a token
// may hold part of one).
py::str utf8_text(const std::string& bytes);
// Token ids from a list of ints or an integer array of `ndim` dimensions, each in
// [0, vocab), named `what` in errors: TypeError for values that are not integers,
// ValueError for a wrong shape, an id outside the vocabulary, or no ids unless
// `allow_empty` (decode([]) is "", as encode("") is []; a prompt needs a token). Any
// integer dtype and layout is taken (int64, unsigned, strided views).
struct Ids {
  std::vector<int32_t> values;  // row-major: a copy, so the caller's array may change meanwhile
  std::vector<int64_t> shape;   // (T) or (B, T)
};
Ids ids_array(const py::handle& obj, int64_t vocab, const char* what, int ndim, bool allow_empty = false);
std::vector<int32_t> ids_argument(const py::handle& obj, int64_t vocab, const char* what,  // 1-D
                                  bool allow_empty = false);

void bind_model(py::module_& m);
void bind_generate(py::class_<Loaded, LoadedPtr>& model);
void bind_train(py::module_& m);
void bind_tensor(py::module_& m);
void bind_nn(py::module_& m);  // into the submodule folio.nn
// Tensor's in-place operators, and the grad switch folio.no_grad (python/folio/__init__.py) uses.
void bind_tensor_inplace(py::class_<Tensor>& t, py::module_& m);
// The other operand of x's operators: a Tensor, or a number as a tensor of x's shape, or
// an array (numpy's too) to broadcast (tensor.cpp).
Tensor operand(const Tensor& x, const py::handle& other);
// x[key] for integers and slices of step 1 (tensor_index.cpp); IndexError otherwise.
Tensor index_tensor(const Tensor& x, const py::object& key);
// A read-only (or writable) numpy array over the tensor's data, holding the tensor.
py::object tensor_view(const Tensor& t, bool writable = false);

}  // namespace folio::python
