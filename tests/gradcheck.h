#pragma once
// The one gradient check every op and layer goes through: backward of the scalar
// sum(f(inputs) * R), with R a fixed random tensor, against central differences of
// the same scalar accumulated in double.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "autograd/ops.h"

namespace folio::testing {

struct GradcheckOptions {
  float eps = 1e-3f;
  float rtol = 1e-2f;
  float atol = 2e-3f;
  uint64_t seed = 1234;
};

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

inline double weighted_sum(const Tensor& out, const Tensor& r) {
  double s = 0.0;
  for (int64_t i = 0; i < out.numel(); ++i) s += double(out.data()[i]) * double(r.data()[i]);
  return s;
}

// Checks d sum(f(inputs) * R) / d input for every input that requires grad.
inline ::testing::AssertionResult gradcheck(const Fn& f, std::vector<Tensor> inputs,
                                             GradcheckOptions opt = {}) {
  for (Tensor& x : inputs) x.zero_grad();
  Tensor out = f(inputs);
  Rng rng(opt.seed);
  const Tensor r = Tensor::randn(out.shape(), rng);
  if (!out.requires_grad()) return ::testing::AssertionFailure() << "output does not require grad";
  sum(mul(out, r)).backward();

  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    if (!x.has_grad()) return ::testing::AssertionFailure() << "input " << k << " received no gradient";
    const std::vector<float> analytic = x.grad().to_vector();
    for (int64_t i = 0; i < x.numel(); ++i) {
      NoGradGuard no_grad;
      float* p = x.data() + i;
      const float saved = *p;
      *p = saved + opt.eps;
      const double up = weighted_sum(f(inputs), r);
      *p = saved - opt.eps;
      const double down = weighted_sum(f(inputs), r);
      *p = saved;
      const double numeric = (up - down) / (2.0 * opt.eps);
      const double a = analytic[i];
      if (!(std::abs(a - numeric) <= opt.atol + opt.rtol * std::max(std::abs(a), std::abs(numeric))))
        return ::testing::AssertionFailure()
               << "input " << k << " " << x.shape() << " element " << i << ": analytic " << a
               << " vs numeric " << numeric;
    }
  }
  return ::testing::AssertionSuccess();
}

// A leaf with values from N(0, stddev), requiring grad.
inline Tensor param(const Shape& shape, uint64_t seed, float stddev = 1.0f) {
  Rng rng(seed);
  return Tensor::randn(shape, rng, stddev).set_requires_grad();
}

}  // namespace folio::testing
