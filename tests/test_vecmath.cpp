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

}  // namespace
}  // namespace folio::kernels
