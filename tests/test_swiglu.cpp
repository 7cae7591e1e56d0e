// The fused SwiGLU kernels (autograd/kernels/swiglu.h) against plain std::exp
// arithmetic in double: the exp to 2 ulp over the whole float range with its edge
// cases, the rows forward and backward on both paths, and the op against the
// composition it replaced, mul(silu(gate), up).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "autograd/kernels/swiglu.h"
#include "autograd/ops.h"
#include "base/rng.h"

namespace folio::kernels {
namespace {

using ExpN = void (*)(const float*, float*, int64_t);
using Rows = void (*)(const float*, float*, int64_t, int64_t);
using Backward = void (*)(const float*, const float*, float*, bool, int64_t, int64_t);

// The paths this CPU can run: the plain one always, the AVX2 one where it has AVX2 + FMA.
struct Path {
  const char* name;
  ExpN exp;
  Rows rows;
  Backward backward;
};
std::vector<Path> paths() {
  std::vector<Path> p{{"plain", detail::exp_n_plain, detail::swiglu_rows_plain, detail::swiglu_backward_plain}};
  if (detail::avx2_fma()) p.push_back({"avx2", detail::exp_n_avx2, detail::swiglu_rows_avx2, detail::swiglu_backward_avx2});
  return p;
}

// Distance in representable floats (both finite or both the same inf).
int64_t ulps(float a, float b) {
  auto key = [](float f) {
    const int32_t i = std::bit_cast<int32_t>(f);
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);  // monotonic in f, -0 next to +0
  };
  return std::abs(key(a) - key(b));
}

TEST(Swiglu, ExpWithin2UlpOfLibmOverTheFloatRange) {
  std::vector<float> x;
  for (float v = -110.0f; v <= 95.0f; v += 0.000913f) x.push_back(v);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (float v : {0.0f, -0.0f, 88.0f, -88.0f, 100.0f, -100.0f, 88.72283f, 88.72284f, -87.33654f, -103.9f, -104.0f,
                  1e-30f, -1e-30f, 0.5f * 0.6931472f, 1.0f, -1.0f})
    x.push_back(v);
  const int64_t n = int64_t(x.size());
  for (const Path& p : paths()) {
    std::vector<float> y(x.size());
    p.exp(x.data(), y.data(), n);
    int64_t worst = 0;
    float worst_at = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = float(std::exp(double(x[i])));
      const int64_t d = std::isinf(want) ? (y[i] == want ? 0 : 1000) : ulps(y[i], want);
      if (d > worst) worst = d, worst_at = x[i];
    }
    EXPECT_LE(worst, 2) << p.name << ": " << worst << " ulp at x = " << worst_at;
    // The edge cases exactly, a tail of 7 lanes (the AVX2 path's masked loads) included.
    const std::vector<float> edge{0.0f, -0.0f, inf, -inf, nan, -nan, 100.0f};
    std::vector<float> e(edge.size());
    p.exp(edge.data(), e.data(), int64_t(edge.size()));
    EXPECT_EQ(e[0], 1.0f) << p.name;
    EXPECT_EQ(e[1], 1.0f) << p.name;
    EXPECT_EQ(e[2], inf) << p.name;
    EXPECT_EQ(e[3], 0.0f) << p.name;
    EXPECT_TRUE(std::isnan(e[4]) && std::isnan(e[5])) << p.name;
    EXPECT_EQ(e[6], inf) << p.name;
  }
  EXPECT_EQ(detail::exp_plain(-200.0f), 0.0f);
  EXPECT_GT(detail::exp_plain(-100.0f), 0.0f);  // a subnormal, not flushed
}

// silu(g) * up and its derivatives in double through std::exp.
struct Reference {
  double out, dgate, dup;
};
Reference reference(double g, double u, double d) {
  const double s = 1.0 / (1.0 + std::exp(-g));
  return {g * s * u, d * u * s * (1.0 + g * (1.0 - s)), d * g * s};
}

TEST(Swiglu, RowsMatchTheReferenceOnBothPaths) {
  Rng rng(3);
  for (int64_t H : {1, 5, 8, 13, 64, 67}) {
    const int64_t rows = 3;
    std::vector<float> x(rows * 2 * H), g(rows * H), prior(rows * 2 * H);
    for (float& v : x) v = 4.0f * (2.0f * rng.uniform() - 1.0f);  // gates over the sigmoid's both ends
    x[0] = 30.0f, x[rows * 2 * H - H - 1] = -30.0f;  // saturated gates, first and last of a row's gate
    for (float& v : g) v = 2.0f * rng.uniform() - 1.0f;
    for (float& v : prior) v = rng.uniform();
    for (const Path& p : paths()) {
      std::vector<float> out(rows * H), stored(rows * 2 * H, 123.0f), added = prior;
      p.rows(x.data(), out.data(), rows, H);
      p.backward(x.data(), g.data(), stored.data(), true, rows, H);
      p.backward(x.data(), g.data(), added.data(), false, rows, H);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < H; ++i) {
          const int64_t gi = r * 2 * H + i, ui = gi + H;
          const Reference want = reference(x[gi], x[ui], g[r * H + i]);
          const auto tol = [](double v) { return 2e-6 * (1.0 + std::abs(v)); };
          ASSERT_NEAR(out[r * H + i], want.out, tol(want.out)) << p.name << " H " << H << " r " << r << " i " << i;
          ASSERT_NEAR(stored[gi], want.dgate, tol(want.dgate)) << p.name << " H " << H << " i " << i;
          ASSERT_NEAR(stored[ui], want.dup, tol(want.dup)) << p.name << " H " << H << " i " << i;
          ASSERT_NEAR(added[gi], prior[gi] + want.dgate, tol(want.dgate) + 1e-6) << p.name << " H " << H;
          ASSERT_NEAR(added[ui], prior[ui] + want.dup, tol(want.dup) + 1e-6) << p.name << " H " << H;
        }
      // The decoder packs in place: out over x's front, row by row.
      std::vector<float> in_place = x;
      p.rows(in_place.data(), in_place.data(), rows, H);
      for (int64_t i = 0; i < rows * H; ++i) ASSERT_EQ(in_place[i], out[i]) << p.name << " H " << H << " at " << i;
    }
  }
}

}  // namespace
}  // namespace folio::kernels

namespace folio {
namespace {

// The op against what FeedForward computed before it: split, silu, mul.
TEST(Swiglu, OpMatchesTheComposition) {
  Rng ra(5), rb(5), rng(6);  // a and b: the same values in storages of their own
  Tensor a = Tensor::randn({2, 7, 2 * 37}, ra, 2.0f).set_requires_grad();
  Tensor b = Tensor::randn({2, 7, 2 * 37}, rb, 2.0f).set_requires_grad();
  const Tensor fused = swiglu(a);
  const std::vector<Tensor> halves = split(b, {37, 37});
  const Tensor composed = mul(silu(halves[0]), halves[1]);
  ASSERT_EQ(fused.shape(), composed.shape());
  for (int64_t i = 0; i < fused.numel(); ++i)
    ASSERT_NEAR(fused.data()[i], composed.data()[i], 1e-6f * (1.0f + std::abs(composed.data()[i]))) << i;
  const Tensor w = Tensor::randn(fused.shape(), rng);
  sum(mul(fused, w)).backward();
  sum(mul(composed, w)).backward();
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_NEAR(a.grad().data()[i], b.grad().data()[i], 1e-5f * (1.0f + std::abs(b.grad().data()[i]))) << i;
}

TEST(Swiglu, RefusesAnOddLastDim) {
  Rng rng(1);
  EXPECT_THROW(swiglu(Tensor::randn({3, 5}, rng)), std::exception);
}

}  // namespace
}  // namespace folio
