// Tensor's in-place operators (-=, +=, *=, /=) and the switch under folio.no_grad.
// Without the operators Python fell back to `x = x - y`: `p -= lr * p.grad` made a new
// tensor and rebound the name, so a hand-written SGD step over a module's parameters
// changed none of them and said nothing. They follow torch's rules:
//   - they write into the tensor's own storage (its module, its numpy views see it);
//   - on a tensor that requires grad (or with a right side that does) only under
//     folio.no_grad(): autograd records no in-place op, and an optimizer step is no op
//     of the graph;
//   - the result keeps the left operand's shape: the right side broadcasts into it;
//   - the write bumps the storage's version (Tensor::mark_modified), so a graph that
//     saved the old values for its gradient refuses backward() (autograd/backward.cpp's
//     check) instead of computing from the new ones. A graph that did not save them
//     (x + y reads neither in backward) is unaffected, as in torch.
#include <cstring>
#include <optional>

#include "autograd/ops.h"
#include "python/bindings.h"

namespace folio::python {
namespace {

std::string shape_of(const Tensor& t) {
  std::string s = "(";
  for (int d = 0; d < t.ndim(); ++d) s += cat(d ? ", " : "", t.size(d));
  return s + (t.ndim() == 1 ? ",)" : ")");
}

// x op= other: `symbol` is "-=", `op` the out-of-place op it stands for ("-").
template <class Op>
py::object update_in_place(const py::object& self, const py::handle& other, const char* symbol, const char* op, Op fn) {
  const Tensor x = self.cast<Tensor>();
  const Tensor y = operand(x, other);
  if (grad_enabled() && (x.requires_grad() || y.requires_grad())) {
    const std::string what = x.requires_grad()
                                 ? cat("a tensor that requires grad (shape ", shape_of(x), ") in place")
                                 : "a tensor in place from a right side that requires grad";
    throw Error(cat("[", symbol, "] changes ", what, ", which autograd does not record: put an optimizer step such "
                    "as `p ", symbol, " lr * p.grad` inside `with folio.no_grad():` (as torch.no_grad()), or write "
                    "x = x ", op, " y for a new tensor in the graph"));
  }
  Tensor result;  // x's shape, or larger when x would broadcast into y
  {
    NoGradGuard no_grad;
    result = fn(x, y);
  }
  if (result.shape() != x.shape())
    throw Error(cat("[", symbol, "] the result has shape ", shape_of(result), ", not the left side's ", shape_of(x),
                    ": an in-place update keeps the left tensor's shape, so the right side (shape ", shape_of(y),
                    ") must broadcast into it; write x = x ", op, " y for a tensor of the larger shape"));
  // Computed aside and copied: y may be x itself, or share its storage (x -= x.T).
  if (x.numel() > 0) std::memcpy(x.data(), result.data(), size_t(x.numel()) * sizeof(float));
  x.mark_modified();
  return self;
}

// One folio.no_grad() block's guard; folio/__init__.py's no_grad keeps a stack of them.
struct NoGradScope {
  std::optional<NoGradGuard> guard;
};

}  // namespace

void bind_tensor_inplace(py::class_<Tensor>& t, py::module_& m) {
  t.def("__isub__", [](const py::object& s, const py::handle& o) { return update_in_place(s, o, "-=", "-", sub); },
        py::arg("other"), "x -= y in x's own storage (under folio.no_grad() when either requires grad).")
      .def("__iadd__", [](const py::object& s, const py::handle& o) { return update_in_place(s, o, "+=", "+", add); },
           py::arg("other"), "x += y in x's own storage (under folio.no_grad() when either requires grad).")
      .def("__imul__", [](const py::object& s, const py::handle& o) { return update_in_place(s, o, "*=", "*", mul); },
           py::arg("other"), "x *= y in x's own storage (under folio.no_grad() when either requires grad).")
      .def("__itruediv__",
           [](const py::object& s, const py::handle& o) { return update_in_place(s, o, "/=", "/", div); },
           py::arg("other"), "x /= y in x's own storage (under folio.no_grad() when either requires grad).");

  // Grad mode is a thread's own (a thread_local of autograd), as torch's: the guard
  // is made and dropped on the thread of the `with` block.
  py::class_<NoGradScope>(m, "_NoGradScope")
      .def(py::init<>())
      .def("enter", [](NoGradScope& s) { s.guard.emplace(); })
      .def("exit", [](NoGradScope& s) { s.guard.reset(); });
  m.def("is_grad_enabled", &grad_enabled,
        "Whether ops on tensors that require grad record the graph in this thread (False inside folio.no_grad()).");
}

}  // namespace folio::python
