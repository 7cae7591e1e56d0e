#include "nn/arena.h"

#include <algorithm>

#include "base/error.h"

namespace folio::nn {

Arena::Arena(int64_t numel, Rng& init) : Arena(numel) { s_->init = &init; }

Arena::Arena(int64_t numel) : Arena() {
  if (numel < 0) fail("arena", "size must not be negative, got ", numel);
  // Zeros, not garbage, in any slice a module's count promised but it never took.
  s_->flat = Tensor::zeros({numel}).set_requires_grad();
  s_->flat.grad_data();  // the views made from here on share this gradient
  s_->initialise = true;
}

Arena Arena::sharing(const Tensor& weights) {
  if (!weights.is_leaf() || weights.ndim() != 1) fail("arena", "shares a flat leaf, got shape ", weights.shape());
  Arena a;
  // detach(): the same storage (and so the same version counter: an optimizer step on
  // the model is seen by graphs recorded on the replica), without the gradient.
  a.s_->flat = weights.detach().set_requires_grad();
  a.s_->flat.grad_data();
  return a;
}

Arena Arena::to_be_loaded(int64_t numel) {
  Arena a(numel);
  a.s_->initialise = false;
  return a;
}

Tensor Arena::take(const Shape& shape) {
  const int64_t n = shape.numel();
  if (s_->taken + n > s_->flat.numel())
    fail("arena", "a parameter of shape ", shape, " does not fit: ", s_->taken, " of ", s_->flat.numel(),
         " elements are taken (a module's parameter count is wrong)");
  Tensor t = s_->flat.alias(s_->taken, shape);
  s_->taken += n;
  return t;
}

Tensor Arena::normal(const Shape& shape, float stddev) {
  Tensor t = take(shape);
  if (s_->initialise) {
    if (!s_->init) fail("arena", "a parameter of shape ", shape, " needs random initial values: give the arena an Rng");
    float* p = t.data();
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float z = s_->init->normal();
      p[i] = stddev == 0.0f ? 0.0f : stddev * z;  // +0, not the -0 of 0 * a negative draw
    }
  }
  return t;
}

Tensor Arena::full(const Shape& shape, float value) {
  Tensor t = take(shape);
  if (s_->initialise) std::fill_n(t.data(), t.numel(), value);
  return t;
}

Tensor Arena::since(int64_t begin, const Shape& shape) const {
  if (begin < 0 || begin + shape.numel() != s_->taken)
    fail("arena", "the slices taken since ", begin, " (", s_->taken - begin, " elements) are not of shape ", shape);
  return s_->flat.alias(begin, shape);
}

}  // namespace folio::nn
