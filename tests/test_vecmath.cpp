// The vectorizable exp/erf against libm, over their whole useful range.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/kernels/vecmath.h"

namespace folio::kernels {
namespace {

TEST(VecMath, ExpMatchesLibm) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.001237f) {
    const double ref = std::exp(double(x));
    worst = std::max(worst, std::abs(fast_exp(x) - ref) / ref);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(fast_exp(-200.0f), 0.0f);
  EXPECT_EQ(fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);  // masked softmax entries
  EXPECT_TRUE(std::isinf(fast_exp(100.0f)));
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
}

TEST(VecMath, ErfMatchesLibm) {
  double worst = 0;
  for (float x = -6.0f; x <= 6.0f; x += 0.000731f) worst = std::max(worst, std::abs(fast_erf(x) - std::erf(double(x))));
  EXPECT_LT(worst, 6e-7);
  EXPECT_EQ(fast_erf(0.0f), 0.0f);
}

// GPT-2's GELU, against its published formula in double: the decoder and the autograd
// op both call this kernel, so it is what holds their forward to GPT-2's. Relative
// to the value where it is far from 0 (x << 0, where 1 + tanh u is small), absolute
// elsewhere; and its derivative, which the op's backward uses.
TEST(VecMath, GeluTanhIsGpt2sFormula) {
  const double k = std::sqrt(2.0 / M_PI), a = 0.044715;
  for (double x = -12.0; x <= 12.0; x += 0.00371) {
    const double t = std::tanh(k * (x + a * x * x * x));
    const double want = 0.5 * x * (1.0 + t);
    ASSERT_NEAR(gelu_tanh(float(x)), want, 1e-6 * std::abs(want) + 1e-7) << "x " << x;
    const double slope = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * a * x * x);
    ASSERT_NEAR(gelu_tanh_grad(float(x)), slope, 2e-6 * std::abs(slope) + 1e-7) << "x " << x;
  }
  EXPECT_EQ(gelu_tanh(0.0f), 0.0f);
  EXPECT_EQ(gelu_tanh(-100.0f), 0.0f);
  EXPECT_EQ(gelu_tanh(100.0f), 100.0f);
  EXPECT_TRUE(std::isinf(gelu_tanh(std::numeric_limits<float>::infinity())));
}

}  // namespace
}  // namespace folio::kernels
