// Rotary positions: rope() against its formula, and scores that depend on the distance
// between a query and a key alone.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "nn/attention.h"

namespace folio::nn {
namespace {

// rope() against its formula, computed here in double: the pair (i, i + hs/2) turns by
// p * 10000^(-2i/hs), so a query and a key at positions m and n score by m - n alone.
TEST(ModelOptions, RopeRotatesHalvesByPositionTimesFrequency) {
  const int64_t P = 9, hs = 6, h = 3, T = 4, start = 3;
  const RotaryTables tables(P, hs);
  Rng r(2);
  const Tensor x = Tensor::randn({2, T, hs}, r);
  const Tensor y = rope(x, tables.cos, tables.sin, start);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < h; ++i) {
        const double angle = double(start + t) * std::pow(10000.0, -2.0 * double(i) / double(hs));
        const double x0 = x.at({b, t, i}), x1 = x.at({b, t, i + h});
        EXPECT_NEAR(y.at({b, t, i}), x0 * std::cos(angle) - x1 * std::sin(angle), 1e-5) << t << " " << i;
        EXPECT_NEAR(y.at({b, t, i + h}), x0 * std::sin(angle) + x1 * std::cos(angle), 1e-5) << t << " " << i;
      }
  // q . k depends on the distance only: the same vectors 2 positions further on.
  const Tensor q = Tensor::randn({1, 1, hs}, r), k = Tensor::randn({1, 1, hs}, r);
  auto score = [&](int64_t m, int64_t n) {
    const Tensor a = rope(q, tables.cos, tables.sin, m), c = rope(k, tables.cos, tables.sin, n);
    double s = 0;
    for (int64_t d = 0; d < hs; ++d) s += double(a.data()[d]) * c.data()[d];
    return s;
  };
  EXPECT_NEAR(score(5, 2), score(7, 4), 1e-5);
  EXPECT_GT(std::abs(score(5, 2) - score(5, 4)), 1e-3);  // and it does depend on it
  EXPECT_THROW(rope(x, tables.cos, tables.sin, P - T + 1), Error);  // past the tables
}

}  // namespace
}  // namespace folio::nn
