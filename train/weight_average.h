#pragma once
// An exponential moving average of a model's weights (Polyak averaging), kept in a twin
// model so that it can be evaluated and saved like any other. After optimizer step k
// (counted from 0 over the whole run):
//   avg += (1 - d_k) (w - avg),   d_k = min(decay, (1 + k) / (10 + k))
// The warm-up of d_k keeps the first steps from tying the average to the initial
// weights: at step 0 it follows the weights almost whole (d = 0.1).
#include <cstdint>
#include <memory>
#include <span>

#include "nn/transformer.h"

namespace folio {

class WeightAverage {
 public:
  // Starts equal to `model`'s weights, in the same precision, in eval mode (no dropout).
  WeightAverage(const nn::GPT& model, float decay);
  // Folds in `model`'s weights after optimizer step `step`.
  void update(const nn::GPT& model, int64_t step);
  // The decay applied after optimizer step `step`.
  float decay_at(int64_t step) const;
  // Replaces the average (a resumed run's saved one); sizes must match.
  void restore(std::span<const float> weights);
  const nn::GPT& model() const { return *average_; }
  std::span<const float> weights() const;  // (P,) in flat_parameters() order

 private:
  float decay_;
  std::unique_ptr<nn::GPT> average_;
};

}  // namespace folio
