// folio.tensor and folio's autograd from Python: a Tensor with numpy in and out, the
// arithmetic operators, the functional ops folio has (autograd/ops.h), backward() and
// grad. A tutorial's tensor code runs with its names changed: torch.tensor ->
// folio.tensor, F.softmax(x, -1) -> folio.softmax(x), and the tril mask filled with
// -inf before a softmax -> the same with folio.tril, folio.ones and masked_fill (or
// folio.causal_softmax, one op). A mask (tril == 0) is a numpy bool array: folio's
// tensors are float32 only, and a mask takes no gradient.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <climits>
#include <sstream>

#include "autograd/ops.h"
#include "python/bindings.h"

namespace folio::python {
namespace {

// A float32 array (any numeric array, converted) -> a Tensor holding a copy.
Tensor from_array(const py::handle& obj, bool requires_grad) {
  const py::array any = py::module_::import("numpy").attr("asarray")(obj);
  const char kind = any.dtype().kind();
  if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b')
    throw WrongType(cat("[tensor] needs numbers, got an array of ", std::string(py::str(any.dtype()))));
  const auto a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(any);
  if (a.ndim() > Shape::kMaxDims)
    throw Error(cat("[tensor] folio's tensors have at most ", Shape::kMaxDims, " dimensions, got ", a.ndim()));
  Shape shape;
  shape.ndim = int(a.ndim());
  for (int d = 0; d < shape.ndim; ++d) shape[d] = a.shape(d);
  Tensor t = Tensor::from(shape, std::span<const float>(a.data(), size_t(a.size())));
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

// The other operand of @: a Tensor or an array (numpy's on either side, as the other
// operators take them); a number has no rows to multiply, as to numpy's matmul.
Tensor matmul_operand(const py::handle& other) {
  if (py::isinstance<Tensor>(other)) return other.cast<Tensor>();
  if (!py::isinstance<py::array>(other) && real_value(other))
    throw WrongType(cat("[matmul] needs a Tensor or an array on each side of @, got ", type_name(other),
                        " (a number: use *)"));
  return from_array(other, false);
}

// The axis of sum and mean: None (all of them) or an integer, numpy's too; not a bool.
std::optional<int> axis_argument(const py::handle& axis, const char* op) {
  if (axis.is_none()) return std::nullopt;
  const std::optional<py::int_> i = is_bool(axis) ? std::nullopt : integer_value(axis);
  if (!i) throw WrongType(cat("[", op, "] axis must be an int or None, got ", std::string(py::repr(axis)), " (",
                              type_name(axis), ")"));
  int64_t v = INT64_MAX;
  try {
    v = i->cast<int64_t>();
  } catch (const py::cast_error&) {  // past int64: as far out of range as INT64_MAX
  }
  if (v < INT_MIN || v > INT_MAX) throw Error(cat("[", op, "] axis ", std::string(py::repr(axis)), " is out of range"));
  return int(v);
}

// x.sum(axis) and x.mean(axis), folio.sum: the whole tensor, or along an axis.
Tensor reduce(const Tensor& x, const py::handle& axis_obj, bool keepdim, bool mean_of) {
  const std::optional<int> axis = axis_argument(axis_obj, mean_of ? "mean" : "sum");
  if (!axis) return mean_of ? mean(x) : sum(x);
  return mean_of ? mean(x, *axis, keepdim) : sum(x, *axis, keepdim);
}

std::string shape_text(const Tensor& t) {
  std::string s = "(";
  for (int d = 0; d < t.ndim(); ++d) s += cat(d ? ", " : "", t.size(d));
  return s + (t.ndim() == 1 ? ",)" : ")");
}

// A mask: a Tensor, or an array of bools or numbers (nonzero: fill), as float 0/1.
Tensor mask_of(const py::handle& mask) {
  return py::isinstance<Tensor>(mask) ? mask.cast<Tensor>() : from_array(mask, false);
}

// x with `value` where the mask is set: the mask broadcasts over x's leading dims.
Tensor masked_fill_of(const Tensor& x, const py::handle& mask, float value) {
  return masked_fill(x, mask_of(mask), value);
}

// x (..., Tq, Tk) with zeros above diagonal `diagonal` (torch.tril): a masked_fill,
// so its gradient is x's below it and zero above.
Tensor tril_of(const Tensor& x, int64_t diagonal) {
  if (x.ndim() < 2) throw Error(cat("[tril] needs a tensor of at least 2 dimensions (..., T, T), got shape ", x.shape()));
  const int64_t rows = x.size(-2), cols = x.size(-1);
  Tensor above = Tensor::zeros({rows, cols});  // (Tq, Tk): 1 where j > i + diagonal
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = std::max<int64_t>(0, i + diagonal + 1); j < cols; ++j) above.data()[i * cols + j] = 1.0f;
  return masked_fill(x, above, 0.0f);
}

// The count of a shape's values, and of their bytes, must fit in an int64: a count that
// wrapped made a tensor whose shape claimed more values than its memory held, which
// sum() read as none and indexing read past. (-1, reshape's "the rest", counts as 1.)
void require_countable(const std::vector<int64_t>& dims, const char* op) {
  int64_t bytes = int64_t(sizeof(float));
  for (const int64_t d : dims)
    if (d >= 0 && __builtin_mul_overflow(bytes, d, &bytes)) {
      std::string shape;
      for (const int64_t e : dims) shape += cat(shape.empty() ? "(" : ", ", e);
      throw Error(cat("[", op, "] shape ", shape, ") has more than 2**63 bytes of values: more than memory holds"));
    }
}

// The dims of folio.ones(2, 3) or folio.ones((2, 3)).
Shape shape_of_args(const py::args& dims, const char* op) {
  const py::tuple list = dims.size() == 1 && py::isinstance<py::sequence>(dims[0]) ? py::tuple(dims[0]) : py::tuple(dims);
  if (list.size() > Shape::kMaxDims)
    throw Error(cat("[", op, "] folio's tensors have at most ", Shape::kMaxDims, " dimensions, got ", list.size()));
  Shape s;
  s.ndim = int(list.size());
  for (int d = 0; d < s.ndim; ++d) {
    const std::optional<py::int_> size = integer_value(list[d]);  // np.int64 too
    if (!size) throw WrongType(cat("[", op, "] dimensions are integers, got ", std::string(py::repr(list[d]))));
    try {
      s[d] = size->cast<int64_t>();
    } catch (const py::cast_error&) {
      throw Error(cat("[", op, "] dimension ", std::string(py::repr(list[d])), " is more than a tensor can hold"));
    }
    if (s[d] < 0) throw Error(cat("[", op, "] dimension ", s[d], " is negative"));
  }
  require_countable(std::vector<int64_t>(s.dims.begin(), s.dims.begin() + s.ndim), op);
  return s;
}

// x == other as numpy does it: a bool array (the mask masked_fill takes).
py::object compare(const Tensor& x, const py::handle& other, const char* ufunc) {
  const py::object rhs = py::isinstance<Tensor>(other) ? tensor_view(other.cast<Tensor>()) : py::reinterpret_borrow<py::object>(other);
  return py::module_::import("numpy").attr(ufunc)(tensor_view(x), rhs);
}

std::vector<int32_t> targets_of(const py::handle& obj, int64_t classes) {
  return ids_argument(obj, classes, "[cross_entropy] targets");
}

}  // namespace

Tensor operand(const Tensor& x, const py::handle& other) {
  if (py::isinstance<Tensor>(other)) return other.cast<Tensor>();
  // A number, numpy's scalars too (np.float32(2)); an array is no number here, even of
  // one element, but an array to broadcast.
  if (!py::isinstance<py::array>(other))
    if (const std::optional<double> v = real_value(other)) return Tensor::full(x.shape(), float(*v));
  return from_array(other, false);
}

py::object tensor_view(const Tensor& t, bool writable) {
  std::vector<py::ssize_t> shape;
  for (int d = 0; d < t.ndim(); ++d) shape.push_back(t.size(d));
  // The capsule's Tensor shares the storage: the array keeps it alive, also after every
  // Python object of the tensor (or the module that owns it) is gone.
  const py::capsule owner(new Tensor(t), [](void* p) { delete static_cast<Tensor*>(p); });
  py::array_t<float> a(shape, t.data(), owner);
  if (!writable) a.attr("setflags")(py::arg("write") = false);
  return a;
}

void bind_tensor(py::module_& m) {
  py::class_<Tensor> t(m, "Tensor", "A float32 tensor of folio's autograd: folio.tensor(array) makes one.");
  // Above numpy's: np.float32(1) - t and array + t call the tensor's reflected operator,
  // which records the op, instead of numpy's, which would read t as an array and return
  // one, cut from the graph (torch's tensors set the same).
  t.attr("__array_priority__") = 1000;
  t.def_property_readonly("shape", [](const Tensor& x) {
     std::vector<int64_t> s;
     for (int d = 0; d < x.ndim(); ++d) s.push_back(x.size(d));
     return py::tuple(py::cast(s));
   }, "The dimensions, as a tuple.")
      .def_property_readonly("ndim", &Tensor::ndim, "The number of dimensions.")
      .def_property_readonly("requires_grad", &Tensor::requires_grad, "Whether backward() computes its gradient.")
      .def_property_readonly(
          "grad", [](const Tensor& x) -> py::object { return x.has_grad() ? py::cast(x.grad()) : py::none(); },
          "The gradient backward() left (a Tensor), or None.")
      .def("numpy", &tensor_view, py::arg("writable") = false,
           "The data as a numpy array of float32 that shares the tensor's memory (no copy) and keeps it\n"
           "alive.\n\n"
           "Args:\n    writable: False (the default) gives a read-only array. True lets writes change the\n"
           "        tensor in place, outside autograd: for setting a module's weights; not while a graph\n"
           "        that read the tensor awaits backward(). An optimizer step is `p -= lr * p.grad` under\n"
           "        folio.no_grad().")
      .def("__array__", [](const Tensor& x, const py::object&) { return tensor_view(x); }, py::arg("dtype") = py::none())
      .def("item", &Tensor::item, "The value of a one-element tensor, as a float.")
      .def(
          "__bool__",
          [](const Tensor& x) {
            // As numpy and torch: without it, every tensor was true, folio.tensor(0.0) too.
            if (x.numel() != 1)
              throw Error(cat("[bool] the truth of a tensor of shape ", shape_text(x), " is ambiguous: one value has "
                              "one (use .item(), or numpy's any() or all() on .numpy())"));
            return x.item() != 0.0f;
          },
          "Whether the value of a one-element tensor is nonzero; ValueError for any other.")
      .def(
          "backward",
          [](const Tensor& x) {
            py::gil_scoped_release nogil;
            x.backward();
          },
          "Computes the gradients of this scalar (a 0-d tensor) with respect to every tensor it came from\n"
          "that requires them, adding into their .grad.")
      .def("zero_grad", &Tensor::zero_grad, "Sets the gradient, if any, to zeros.")
      .def("detach", &Tensor::detach, "The same data, cut from the graph (no gradient flows back).")
      .def("__matmul__", [](const Tensor& a, const py::handle& b) {
        const Tensor rhs = matmul_operand(b);
        py::gil_scoped_release nogil;
        return matmul(a, rhs);
      })
      .def("__rmatmul__", [](const Tensor& b, const py::handle& a) {
        const Tensor lhs = matmul_operand(a);
        py::gil_scoped_release nogil;
        return matmul(lhs, b);
      })
      .def("__add__", [](const Tensor& a, const py::handle& b) { return add(a, operand(a, b)); })
      .def("__radd__", [](const Tensor& a, const py::handle& b) { return add(operand(a, b), a); })
      .def("__sub__", [](const Tensor& a, const py::handle& b) { return sub(a, operand(a, b)); })
      .def("__rsub__", [](const Tensor& a, const py::handle& b) { return sub(operand(a, b), a); })
      .def("__mul__", [](const Tensor& a, const py::handle& b) { return mul(a, operand(a, b)); })
      .def("__rmul__", [](const Tensor& a, const py::handle& b) { return mul(operand(a, b), a); })
      .def("__truediv__", [](const Tensor& a, const py::handle& b) { return div(a, operand(a, b)); })
      .def("__rtruediv__", [](const Tensor& a, const py::handle& b) { return div(operand(a, b), a); })
      .def("__neg__", [](const Tensor& a) { return neg(a); })
      .def("__getitem__", &index_tensor, py::arg("key"),
           "x[b, :t+1], wei[:T, :T]: integers and slices of step 1 on the leading axes, a copy that\n"
           "gradients flow back through. Other indices (steps, None, ..., arrays) raise IndexError.")
      .def("__setitem__", [](const Tensor&, const py::handle&, const py::handle&) {
        throw WrongType("[index] folio's tensors are not assigned into: build the result with ops (masked_fill, "
                        "concat), or write through t.numpy(writable=True) outside autograd");
      })
      .def("__eq__", [](const Tensor& a, const py::handle& b) { return compare(a, b, "equal"); },
           "Elementwise ==, as a numpy bool array (a mask for masked_fill).")
      .def("__ne__", [](const Tensor& a, const py::handle& b) { return compare(a, b, "not_equal"); },
           "Elementwise !=, as a numpy bool array.")
      .def("__hash__", [](const Tensor& a) { return std::hash<const void*>()(a.impl()); })
      .def("masked_fill", &masked_fill_of, py::arg("mask"), py::arg("value"),
           "This tensor with `value` where mask is True (see folio.masked_fill).")
      .def_property_readonly("T", [](const Tensor& a) { return transpose(a); }, "The last two dimensions swapped.")
      .def(
          "reshape",
          [](const Tensor& a, const std::vector<int64_t>& dims) {
            require_countable(dims, "reshape");
            return reshape(a, dims);
          },
          py::arg("dims"), "The same values in another shape (a list; one dimension may be -1).")
      .def(
          "sum",
          [](const Tensor& a, const py::object& axis, bool keepdim) { return reduce(a, axis, keepdim, false); },
          py::arg("axis") = py::none(), py::arg("keepdim") = false, "The sum of all values, or along an axis.")
      .def(
          "mean",
          [](const Tensor& a, const py::object& axis, bool keepdim) { return reduce(a, axis, keepdim, true); },
          py::arg("axis") = py::none(), py::arg("keepdim") = false, "The mean of all values, or along an axis.")
      .def("__repr__", [](const Tensor& x) {
        std::string r = cat("folio.Tensor(shape=", shape_text(x), x.requires_grad() ? ", requires_grad=True" : "", ",\n");
        return r + std::string(py::str(tensor_view(x))) + ")";
      });
  bind_tensor_inplace(t, m);

  m.def("tensor", &from_array, py::arg("data"), py::arg("requires_grad") = false,
        "A Tensor holding a float32 copy of an array (or nested lists).\n\n"
        "Args:\n    data: numbers, up to 4 dimensions; converted to float32.\n"
        "    requires_grad: whether backward() computes its gradient.\n\nReturns:\n    Tensor");
  m.def("matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, py::arg("a"), py::arg("b"),
        "a @ b, batched over leading dimensions.");
  m.def("softmax", [](const Tensor& x) { return softmax(x); }, py::arg("x"), "Softmax over the last dimension.");
  m.def("log_softmax", [](const Tensor& x) { return log_softmax(x); }, py::arg("x"),
        "Log-softmax over the last dimension.");
  m.def("causal_softmax", [](const Tensor& s, float scale) { return causal_softmax(s, scale); }, py::arg("scores"),
        py::arg("scale") = 1.0f,
        "Scores (..., T, T) -> the softmax of scale * scores over the keys up to each query: what the tutorials\n"
        "write as scores.masked_fill(tril == 0, -inf) then a softmax.");
  m.def("masked_fill", &masked_fill_of, py::arg("x"), py::arg("mask"), py::arg("value"),
        "x with `value` where mask is True (or nonzero), as torch's x.masked_fill(mask, value).\n\n"
        "Args:\n    x: Tensor.\n    mask: a bool array (tril == 0), or a Tensor or array of numbers; it broadcasts\n"
        "        over x's leading dims, e.g. (T, T) over (B, T, T) scores.\n"
        "    value: a float, float('-inf') before a softmax.\n\n"
        "Returns:\n    Tensor of x's shape; the gradient is x's where kept and zero where filled.");
  m.def("tril", &tril_of, py::arg("x"), py::arg("diagonal") = 0,
        "x (..., T, T) with zeros above the diagonal (above diagonal `diagonal`), as torch.tril.");
  m.def(
      "ones", [](const py::args& dims, bool requires_grad) {
        return Tensor::ones(shape_of_args(dims, "ones")).set_requires_grad(requires_grad);
      },
      py::arg("requires_grad") = false, "A Tensor of ones: folio.ones(T, T) or folio.ones((T, T)).");
  m.def(
      "zeros", [](const py::args& dims, bool requires_grad) {
        return Tensor::zeros(shape_of_args(dims, "zeros")).set_requires_grad(requires_grad);
      },
      py::arg("requires_grad") = false, "A Tensor of zeros: folio.zeros(T, T) or folio.zeros((T, T)).");
  m.def(
      "sum",
      [](const Tensor& a, const py::object& axis, bool keepdim) { return reduce(a, axis, keepdim, false); },
      py::arg("x"), py::arg("axis") = py::none(), py::arg("keepdim") = false,
      "The sum of all values, or along an axis (torch.sum(x, 1, keepdim=True) -> folio.sum(x, 1, keepdim=True)).");
  m.def("relu", [](const Tensor& x) { return relu(x); }, py::arg("x"), "max(x, 0).");
  m.def("gelu", [](const Tensor& x) { return gelu(x); }, py::arg("x"), "x * Phi(x) (exact, as torch.nn.GELU()).");
  m.def("tanh", [](const Tensor& x) { return tanh(x); }, py::arg("x"), "tanh(x).");
  m.def("exp", [](const Tensor& x) { return exp(x); }, py::arg("x"), "exp(x).");
  m.def("log", [](const Tensor& x) { return log(x); }, py::arg("x"), "log(x).");
  m.def("layer_norm", [](const Tensor& x, const Tensor& w, const Tensor& b) { return layer_norm(x, w, b); },
        py::arg("x"), py::arg("weight"), py::arg("bias"),
        "Normalises the last dimension (biased variance, eps 1e-5), then * weight + bias (each (C)).");
  m.def(
      "cross_entropy",
      [](const Tensor& logits, const py::handle& targets) {
        return cross_entropy(logits, targets_of(targets, logits.size(-1)));
      },
      py::arg("logits"), py::arg("targets"),
      "The mean cross-entropy of logits (N, V) against N target ids (a list or integer array).");
  m.def(
      "dropout",
      [](const Tensor& x, float p, uint64_t seed, bool training) {
        Rng rng(seed);
        return dropout(x, p, training, rng);
      },
      py::arg("x"), py::arg("p"), py::arg("seed"), py::arg("training") = true,
      "Zeros each value with probability p and scales the rest by 1 / (1 - p), the mask drawn from seed.\n"
      "Outside training (training=False), x unchanged.");
}

}  // namespace folio::python
