// masked_fill and slice, the tutorials' ops, beyond their gradient checks (in the
// registry): their values, the causal mask filled with -inf against causal_softmax,
// and the shapes they refuse.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include "tests/support.h"

namespace folio {
namespace {

using testing::expect_error;

Tensor above_diagonal(int64_t T) {  // (T, T): 1 where the key is after the query
  Tensor m = Tensor::zeros({T, T});
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = i + 1; j < T; ++j) m.data()[i * T + j] = 1.0f;
  return m;
}

// The tutorials' masked softmax and folio's one op must be the same numbers, bit for
// bit, at sizes below, at and across a SIMD width.
TEST(MaskedFill, MinusInfThenSoftmaxIsCausalSoftmax) {
  for (int64_t T : {1, 5, 8, 16, 37}) {
    Rng rng{uint64_t(T)};
    const Tensor scores = Tensor::randn({3, T, T}, rng);  // (B, T, T)
    const Tensor masked = masked_fill(scores, above_diagonal(T), -std::numeric_limits<float>::infinity());
    EXPECT_EQ(softmax(masked).to_vector(), causal_softmax(scores).to_vector()) << "T " << T;
  }
  // A row with every key hidden has no softmax: NaN, as torch's, not a row of zeros.
  for (float w : softmax(Tensor::full({1, 3}, -std::numeric_limits<float>::infinity())).to_vector())
    EXPECT_TRUE(std::isnan(w));
}

TEST(MaskedFill, FillsWhereTheMaskIsSetAndBroadcastsOverLeadingDims) {
  const Tensor x = Tensor::from({2, 2, 2}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});  // (B, T, T)
  const Tensor mask = Tensor::from({2, 2}, std::vector<float>{0, 1, 0, 0});              // (T, T)
  EXPECT_EQ(masked_fill(x, mask, -9.0f).to_vector(), (std::vector<float>{1, -9, 3, 4, 5, -9, 7, 8}));
  const Tensor row = Tensor::from({2}, std::vector<float>{1, 0});  // (T): the first key hidden
  EXPECT_EQ(masked_fill(x, row, 0.0f).to_vector(), (std::vector<float>{0, 2, 0, 4, 0, 6, 0, 8}));
}

TEST(MaskedFill, RefusesAMaskThatWouldGrowX) {
  expect_error([] { masked_fill(Tensor::zeros({2, 3}), Tensor::zeros({4, 2, 3}), 0.0f); },
               {"[masked_fill]", "mask (4, 2, 3)", "x (2, 3)"});
  expect_error([] { masked_fill(Tensor::zeros({2, 3}), Tensor::zeros({2, 2}), 0.0f); },
               {"[masked_fill]", "(2, 3)", "(2, 2)"});
}

TEST(Slice, CopiesTheBlock) {
  const Tensor x = Tensor::from({2, 3, 2}, std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  const Tensor s = slice(x, {1, 0, 1}, {2, 2, 2});  // x[1:2, 0:2, 1:2]
  EXPECT_EQ(s.shape(), (Shape{1, 2, 1}));
  EXPECT_EQ(s.to_vector(), (std::vector<float>{7, 9}));
  EXPECT_EQ(slice(x, {0, 3, 0}, {2, 3, 2}).numel(), 0);  // empty, as numpy's x[:, 3:]
}

TEST(Slice, RefusesBoundsOutsideTheShape) {
  const Tensor x = Tensor::zeros({2, 3});
  expect_error([&] { slice(x, {0, 1}, {2, 4}); }, {"[slice]", "[1, 4)", "dim 1", "(2, 3)"});
  expect_error([&] { slice(x, {1, 0}, {0, 3}); }, {"[slice]", "[1, 0)", "dim 0"});
  expect_error([&] { slice(x, {0}, {2}); }, {"[slice]", "(2, 3)", "got 1 and 1"});
}

}  // namespace
}  // namespace folio
