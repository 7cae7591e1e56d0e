// What the bindings make of their Python arguments: text as UTF-8 and back, and token
// ids from lists or integer arrays. A wrong kind of value is a TypeError (WrongType), a
// right kind with a wrong shape or range a ValueError (folio::Error); each message
// names the argument and says what was expected.
#include <pybind11/numpy.h>

#include <cstring>

#include "io/config_json.h"
#include "python/bindings.h"

namespace folio::python {

std::string type_name(const py::handle& obj) { return py::str(py::type::of(obj).attr("__name__")); }

namespace {

// What an __index__ or __float__ raised: TypeError is "not a number of that kind" (an
// array of floats asked for an index); anything else is the caller's to see.
void clear_type_error() {
  if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
  PyErr_Clear();
}

[[noreturn]] void out_of_range(const char* what, int64_t i, int64_t id, int64_t vocab) {
  throw Error(cat(what, "[", i, "] is ", id, ", outside the vocabulary [0, ", vocab, ")"));
}

std::string shape_text(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t d = 0; d < a.ndim(); ++d) s += cat(d ? ", " : "", a.shape(d));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

}  // namespace

std::string text_argument(const py::handle& obj, const char* what) {
  if (!py::isinstance<py::str>(obj)) throw WrongType(cat(what, " must be a str, got ", type_name(obj)));
  // A str may hold a lone surrogate ("\ud800"), which has no UTF-8: a ValueError that
  // says where, not pybind11's "Unable to cast".
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(obj.ptr(), &size);
  if (!utf8) {
    PyErr_Clear();
    const py::str s = py::reinterpret_borrow<py::str>(obj);
    Py_ssize_t at = 0;
    const Py_ssize_t n = PyUnicode_GetLength(s.ptr());
    while (at < n && !Py_UNICODE_IS_SURROGATE(PyUnicode_ReadChar(s.ptr(), at))) ++at;
    throw Error(cat(what, " is not valid Unicode text: a lone surrogate at character ", at,
                    " (a str that came from undecodable bytes, e.g. through errors='surrogateescape')"));
  }
  return std::string(utf8, size_t(size));
}

std::string path_argument(const py::handle& obj, const char* what) {
  if (!py::isinstance<py::str>(obj) && !py::isinstance<py::bytes>(obj) && !py::hasattr(obj, "__fspath__"))
    throw WrongType(cat(what, " must be a str or an os.PathLike (pathlib.Path), got ", type_name(obj)));
  // fsencode: the file system's bytes, so a name read through surrogateescape reaches
  // the same file.
  const py::bytes bytes = py::module_::import("os").attr("fsencode")(obj);
  return std::string(bytes);
}

bool is_bool(const py::handle& obj) {
  return PyBool_Check(obj.ptr()) || py::isinstance(obj, py::module_::import("numpy").attr("bool_"));
}

std::optional<py::int_> integer_value(const py::handle& obj) {
  if (PyLong_Check(obj.ptr())) return py::reinterpret_borrow<py::int_>(obj);
  if (is_bool(obj) || !PyIndex_Check(obj.ptr())) return std::nullopt;
  PyObject* i = PyNumber_Index(obj.ptr());
  if (!i) {
    clear_type_error();
    return std::nullopt;
  }
  return py::reinterpret_steal<py::int_>(i);
}

uint64_t seed_argument(const py::handle& seed, const char* what) {
  const std::optional<py::int_> integer = is_bool(seed) ? std::nullopt : integer_value(seed);
  if (!integer) throw WrongType(cat(what, " seed must be an int, got ", type_name(seed)));
  try {
    return integer->cast<uint64_t>();
  } catch (const py::cast_error&) {
    throw Error(cat(what, " seed must be in [0, 2**64), got ", std::string(py::str(seed))));
  }
}

std::optional<double> real_value(const py::handle& obj) {
  const PyNumberMethods* n = Py_TYPE(obj.ptr())->tp_as_number;
  if (!PyFloat_Check(obj.ptr()) && !PyIndex_Check(obj.ptr()) && !(n && n->nb_float)) return std::nullopt;
  const double v = PyFloat_AsDouble(obj.ptr());
  if (v == -1.0 && PyErr_Occurred()) {
    clear_type_error();
    return std::nullopt;
  }
  return v;
}

py::dict config_dict(const nn::GPTConfig& c) {
  py::dict d = py::module_::import("json").attr("loads")(to_json(c).dump());
  d["seed"] = py::int_(c.seed);
  return d;
}

py::str utf8_text(const std::string& bytes) {
  PyObject* s = PyUnicode_DecodeUTF8(bytes.data(), Py_ssize_t(bytes.size()), "replace");
  if (!s) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

Ids ids_array(const py::handle& obj, int64_t vocab, const char* what, int ndim, bool allow_empty) {
  // Lists become int64 arrays; an array comes as it is (asarray copies nothing).
  const py::array arr = py::module_::import("numpy").attr("asarray")(obj);
  // Before the dtype's check: numpy makes [] a float64 array.
  if (arr.size() == 0 && allow_empty && arr.ndim() == ndim) {
    Ids none;
    for (py::ssize_t d = 0; d < arr.ndim(); ++d) none.shape.push_back(arr.shape(d));
    return none;
  }
  if (arr.size() == 0) throw Error(cat(what, " is empty (shape ", shape_text(arr), "): give at least one token id"));
  const char kind = arr.dtype().kind();
  if (kind != 'i' && kind != 'u')
    throw WrongType(cat(what, " must be integers (an int32 or int64 array, or a list of ints), got ",
                        std::string(py::str(arr.dtype())), " values"));
  if (arr.ndim() != ndim)
    throw Error(cat(what, " must be ", ndim == 1 ? "1-D (T)" : "2-D (B, T)", ", got shape ", shape_text(arr)));
  Ids ids;
  for (py::ssize_t d = 0; d < arr.ndim(); ++d) ids.shape.push_back(arr.shape(d));
  ids.values.resize(size_t(arr.size()));
  // Always a copy, checked after it is taken: the model reads the ids with the GIL
  // released, while another Python thread could write into the caller's array, and an
  // id changed after its check would index past a table. (Copying T ids costs nothing
  // beside the forward pass that reads them.)
  if (py::array_t<int32_t, py::array::c_style>::check_(arr)) {
    std::memcpy(ids.values.data(), arr.data(), ids.values.size() * sizeof(int32_t));
    for (size_t i = 0; i < ids.values.size(); ++i)
      if (ids.values[i] < 0 || ids.values[i] >= vocab) out_of_range(what, int64_t(i), ids.values[i], vocab);
    return ids;
  }
  // Any other layout or width: read as int64 (an int64 cast to int32 could wrap into range).
  const auto ints = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(arr);
  for (py::ssize_t i = 0; i < ints.size(); ++i) {
    const int64_t id = ints.data()[i];  // uint64 past INT64_MAX wraps to a negative: still refused
    if (id < 0 || id >= vocab) out_of_range(what, i, id, vocab);
    ids.values[size_t(i)] = int32_t(id);
  }
  return ids;
}

std::vector<int32_t> ids_argument(const py::handle& obj, int64_t vocab, const char* what, bool allow_empty) {
  return ids_array(obj, vocab, what, 1, allow_empty).values;
}

}  // namespace folio::python
