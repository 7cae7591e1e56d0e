// The gradient check itself: a wrong backward is caught and reported with its errors.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/gradcheck.h"
#include "tests/support.h"

namespace folio {
namespace {

// The check must catch what it is for. x * x with a backward of `factor` * 2x * g,
// or (factor < 0) a backward that never touches the input's gradient.
Tensor square_with_backward(const Tensor& x, float factor) {
  Tensor out = Tensor::empty(x.shape());
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) out.data()[i] = x.data()[i] * x.data()[i];
  record(out, "square_with_backward", {&x}, [sx = x.detach(), factor, n](const Tensor& grad, const InputGrads& in) {
    if (factor < 0.0f) return;
    in.write(0, [&](float* gx) {
      for (int64_t i = 0; i < n; ++i) gx[i] += factor * 2.0f * sx.data()[i] * grad.data()[i];
    });
  });
  return out;
}

GradcheckCase square_case(float factor) {
  return {"square", cat("backward x ", factor), [factor] {
            return GradcheckSetup{[factor](const std::vector<Tensor>& v) { return square_with_backward(v[0], factor); },
                                  {testing::param({3, 2}, 1)}, 0, ""};
          }};
}

TEST(Gradcheck, PassesTheRightBackward) {  // the control for the ones below
  const GradcheckResult r = square_case(1.0f).run();
  EXPECT_TRUE(r.pass()) << r.failure();
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_LT(r.max_abs_error(), 1e-3);
  EXPECT_EQ(r.failure(), "");
}

// A backward twice too large: the analytic gradient is 4 x r where the numeric one is
// 2 x r, so every element is off by 2 |x r|, half the larger of the two.
TEST(Gradcheck, ReportsABackwardTwiceTooLargeWithItsErrors) {
  const GradcheckResult r = square_case(2.0f).run();
  ASSERT_FALSE(r.pass()) << "a gradient twice too large passed the check";
  ASSERT_EQ(r.inputs.size(), 1u);
  const InputGradcheck& in = r.inputs[0];
  EXPECT_FALSE(in.pass);
  EXPECT_TRUE(in.received_gradient);
  EXPECT_EQ(in.shape, Shape({3, 2}));
  // R as the check draws it (GradcheckOptions::seed): the expected errors, exactly.
  const Tensor x = testing::param({3, 2}, 1);
  Rng rng(GradcheckOptions{}.seed);
  const Tensor rr = Tensor::randn({3, 2}, rng);
  double largest = 0.0;
  int64_t where = -1;
  for (int64_t i = 0; i < 6; ++i) {
    const double g = 2.0 * x.data()[i] * rr.data()[i];
    if (std::abs(g) > largest) largest = std::abs(g), where = i;
  }
  EXPECT_NEAR(in.max_abs_error, largest, 1e-3 * largest);
  EXPECT_NEAR(r.max_abs_error(), largest, 1e-3 * largest);
  EXPECT_NEAR(in.max_rel_error, 0.5, 1e-3);
  EXPECT_EQ(in.worst, where);  // the largest error is the furthest outside its tolerance
  EXPECT_NEAR(in.worst_numeric, 2.0 * x.data()[where] * rr.data()[where], 1e-3);
  EXPECT_NEAR(in.worst_analytic, 2.0 * in.worst_numeric, 1e-3);
  testing::expect_contains(r.failure(), {cat("input 0 (3, 2) element ", where, ": analytic "), " vs numeric ",
                                         "max rel error 0.5"});
  // GoogleTest's adapter fails with the same message.
  const ::testing::AssertionResult a = testing::gradcheck(square_case(2.0f));
  EXPECT_FALSE(a);
  EXPECT_EQ(a.message(), r.failure());
}

TEST(Gradcheck, ReportsABackwardTenPercentOff) {  // well inside a factor of 2, outside rtol
  const GradcheckResult r = square_case(1.1f).run();
  EXPECT_FALSE(r.pass()) << "a gradient 10% too large passed the check";
  EXPECT_NEAR(r.max_rel_error(), 0.1 / 1.1, 1e-3);
}

TEST(Gradcheck, ReportsAnInputThatReceivedNoGradient) {
  const GradcheckResult r = square_case(-1.0f).run();
  ASSERT_FALSE(r.pass()) << "an input without a gradient passed the check";
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_FALSE(r.inputs[0].received_gradient);
  EXPECT_GT(r.max_abs_error(), 0.1);  // compared as zero against the numeric gradient
  EXPECT_EQ(r.failure(), "input 0 received no gradient");
}

TEST(Gradcheck, ReportsAnOutputWithoutGraph) {
  const GradcheckResult r = gradcheck([](const std::vector<Tensor>& v) { return v[0].detach(); }, {testing::param({2}, 1)});
  EXPECT_FALSE(r.pass());
  EXPECT_EQ(r.failure(), "output does not require grad");
}

TEST(Gradcheck, ANanGradientFails) {
  const GradcheckResult r = gradcheck([](const std::vector<Tensor>& v) { return log(v[0]); },
                                      {Tensor::from({2}, std::vector<float>{-1.0f, 2.0f}).set_requires_grad()});
  EXPECT_FALSE(r.pass());
  EXPECT_TRUE(std::isnan(r.max_abs_error()));
  EXPECT_EQ(r.inputs[0].worst, 0);
}

}  // namespace
}  // namespace folio
