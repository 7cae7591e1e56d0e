#pragma once
// What the Python module's files share (python/): a loaded model as Python holds it,
// the errors Python sees, and each file's function that adds its part to the module.
//   module.cpp    the module: errors, threads, and the parts below
//   model.cpp     folio.load, Model (logits, loss, attention, parameters), Tokenizer
//   generate.cpp  Model.generate and Model.stream
//   train.cpp     folio.train (Run is Python, in folio/__init__.py)
//   tensor.cpp    folio.tensor, Tensor and the functional ops: folio's autograd
#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
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

// Raises KeyboardInterrupt (or whatever a signal handler raised) if a signal came:
// long calls ask between steps, with the GIL taken for the moment of asking.
void check_signals();

// A Python object's text as UTF-8 (a str), or ValueError naming `what`.
std::string text_argument(const py::handle& obj, const char* what);
// Bytes as a str; a byte that is not part of a UTF-8 character becomes U+FFFD (a token
// may hold part of one).
py::str utf8_text(const std::string& bytes);
// Token ids from a list of ints or a 1-D integer array, each in [0, vocab); otherwise
// ValueError naming `what` and what was expected.
std::vector<int32_t> ids_argument(const py::handle& obj, int64_t vocab, const char* what);

void bind_model(py::module_& m);
void bind_generate(py::class_<Loaded, LoadedPtr>& model);
void bind_train(py::module_& m);
void bind_tensor(py::module_& m);

}  // namespace folio::python
