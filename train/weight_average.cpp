#include "train/weight_average.h"

#include <algorithm>

#include "base/error.h"
#include "autograd/parallel.h"

namespace folio {

WeightAverage::WeightAverage(const nn::GPT& model, float decay)
    : decay_(decay), average_(std::make_unique<nn::GPT>(model.config())) {
  const Tensor& from = model.flat_parameters();  // (P,)
  const Tensor& to = average_->flat_parameters();  // (P,)
  std::copy(from.data(), from.data() + from.numel(), to.data());
  to.mark_modified();
  average_->set_precision(model.precision());
  average_->eval();
}

float WeightAverage::decay_at(int64_t step) const {
  return std::min(decay_, float(1 + step) / float(10 + step));
}

void WeightAverage::update(const nn::GPT& model, int64_t step) {
  const float* w = model.flat_parameters().data();  // (P,)
  float* avg = average_->flat_parameters().data();  // (P,)
  const int64_t n = average_->flat_parameters().numel();
  const float keep = 1.0f - decay_at(step);
#pragma omp parallel for simd if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) avg[i] += keep * (w[i] - avg[i]);
  average_->flat_parameters().mark_modified();
}

void WeightAverage::restore(std::span<const float> weights) {
  const Tensor& to = average_->flat_parameters();
  if (int64_t(weights.size()) != to.numel())
    fail("checkpoint", "the saved weight average has ", weights.size(), " values but the model has ", to.numel(),
         " parameters");
  std::copy(weights.begin(), weights.end(), to.data());
  to.mark_modified();
}

std::span<const float> WeightAverage::weights() const {
  const Tensor& flat = average_->flat_parameters();
  return {flat.data(), size_t(flat.numel())};
}

}  // namespace folio
