// Tensor indexing from Python, as far as folio has the op: integers and slices of step
// 1, one per leading axis (x[b, :t+1], wei[:T, :T], x[:, :T]), through autograd's
// slice (whose gradient lands in zeros of x's shape) and a reshape that drops the axes
// an integer picked. The rest of numpy's indexing (steps, None, ..., arrays of indices
// or booleans) raises IndexError saying what is taken, rather than a wrong answer.
#include <Python.h>

#include "autograd/ops.h"
#include "python/bindings.h"

namespace folio::python {
namespace {

constexpr const char* kTaken =
    "folio's tensors take integers and slices of step 1, one per leading axis (x[b, :t+1], wei[:T, :T])";

[[noreturn]] void refuse(const std::string& why) { throw py::index_error(cat("[index] ", why, ": ", kTaken)); }

std::string kind_of(const py::handle& item) {
  if (item.is_none()) return "None (a new axis)";
  if (item.ptr() == Py_Ellipsis) return "... (an ellipsis)";
  if (PyBool_Check(item.ptr())) return "a bool";
  return std::string("a ") + std::string(py::str(py::type::handle_of(item).attr("__name__")));
}

// A Python int or a numpy integer scalar; not a bool (numpy reads x[True] as a new axis)
// nor an array (which has __index__ too, and would be fancy indexing).
bool is_integer(const py::handle& item) {
  if (PyBool_Check(item.ptr())) return false;
  return PyLong_Check(item.ptr()) || py::isinstance(item, py::module_::import("numpy").attr("integer"));
}

}  // namespace

Tensor index_tensor(const Tensor& x, const py::object& key) {
  const py::tuple items = py::isinstance<py::tuple>(key) ? key.cast<py::tuple>() : py::make_tuple(key);
  const int nd = x.ndim();
  if (int(items.size()) > nd) refuse(cat(items.size(), " indices for a tensor of shape ", x.shape()));
  if (items.size() == 0) return x;
  std::vector<int64_t> begin(nd, 0), end(nd), kept;  // kept: the output's dims
  for (int d = 0; d < nd; ++d) end[d] = x.size(d);
  for (int d = 0; d < nd; ++d) {
    if (d >= int(items.size())) {  // axes past the indices are taken whole
      kept.push_back(x.size(d));
      continue;
    }
    const py::handle item = items[d];
    if (py::isinstance<py::slice>(item)) {
      py::ssize_t start = 0, stop = 0, step = 0, length = 0;
      if (!item.cast<py::slice>().compute(x.size(d), &start, &stop, &step, &length)) throw py::error_already_set();
      if (step != 1) refuse(cat("step ", step, " on axis ", d));
      begin[d] = start;
      end[d] = start + length;
      kept.push_back(length);
    } else if (is_integer(item)) {
      const py::int_ index(py::reinterpret_borrow<py::object>(item));
      // Past int64 (2**70, np.uint64's top half) is out of range too, said as numpy says it.
      const long long i_or_overflow = PyLong_AsLongLong(index.ptr());
      const bool overflow = i_or_overflow == -1 && PyErr_Occurred();
      if (overflow) PyErr_Clear();
      int64_t i = i_or_overflow;
      if (overflow || i < -x.size(d) || i >= x.size(d))
        throw py::index_error(cat("[index] index ", std::string(py::repr(index)), " is out of range for axis ", d,
                                  " of size ", x.size(d)));
      if (i < 0) i += x.size(d);
      begin[d] = i;
      end[d] = i + 1;
    } else {
      refuse(cat(kind_of(item), " as the index of axis ", d));
    }
  }
  const Tensor block = slice(x, begin, end);
  return int(kept.size()) == nd ? block : reshape(block, kept);
}

}  // namespace folio::python
