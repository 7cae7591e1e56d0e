#pragma once
// Arena: where a model's parameters live, as llm.c keeps them. One flat buffer of
// weights and one of gradients are allocated before any module is built (the sizes
// follow from the config: every module says how many parameters it needs), and each
// parameter is a leaf view of the next slice, taken in construction order. Nothing
// re-points a parameter afterwards: a module's parameters are back to back in
// named_parameters() order, so MultiHead's heads' key/query/value weights are one
// matrix by construction, and an optimizer or a gradient sum is one loop.
//
// A replica's arena (train/data_parallel.h) reads and writes the model's weights and
// has gradients of its own; building a module on it draws and writes nothing.
#include <cstdint>
#include <memory>

#include "autograd/tensor.h"

namespace folio::nn {

// A handle, like Tensor: copies take slices from the same buffer, so a parent passes
// its arena on to the children it builds.
class Arena {
 public:
  // `numel` fresh parameters (gradients zero), each slice initialised when taken, with
  // normal draws from `init` in the order slices are taken (the recipe's RNG order).
  Arena(int64_t numel, Rng& init);
  explicit Arena(int64_t numel);  // for constant initial values only: nothing to draw from
  // The weights of `weights` (a flat leaf, e.g. GPT::flat_parameters()), shared, and
  // zero gradients of its own. Taking a slice neither draws nor writes a weight.
  static Arena sharing(const Tensor& weights);
  // `numel` zero parameters that a load overwrites, every one: taking a slice draws and
  // writes nothing (a 124M model's normal draws took 2.4 s of a 4.5 s `folio generate`).
  static Arena to_be_loaded(int64_t numel);

  // The next slice of `shape`: ~ N(0, stddev), or all `value` (a replica: as they are).
  // stddev 0 gives zeros but draws all the same, so that an option zeroing one
  // parameter (--zero-init-proj) leaves every other parameter's initial values as they were.
  Tensor normal(const Shape& shape, float stddev);
  Tensor full(const Shape& shape, float value);

  // The slices taken since taken() was `begin`, as one leaf view of `shape`: a module
  // whose children took adjacent parameters sees them as one tensor.
  Tensor since(int64_t begin, const Shape& shape) const;
  int64_t taken() const { return s_->taken; }
  // All weights and gradients: a leaf whose gradient every parameter's is part of.
  const Tensor& flat() const { return s_->flat; }

 private:
  struct State {
    Tensor flat;
    bool initialise = false;  // false: the weights are already there (a replica)
    Rng* init = nullptr;
    int64_t taken = 0;
  };
  Arena() : s_(std::make_shared<State>()) {}
  Tensor take(const Shape& shape);
  std::shared_ptr<State> s_;
};

}  // namespace folio::nn
