// Bad calls throw folio::Error naming the op and the shapes involved.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "autograd/ops.h"
#include "tests/support.h"

namespace folio {
namespace {

using testing::expect_error;

TEST(Errors, MatmulShapeMismatch) {
  expect_error([] { matmul(Tensor::zeros({4, 3}), Tensor::zeros({5, 2})); }, {"[matmul]", "(4, 3)", "(5, 2)"});
}
TEST(Errors, MatmulWrongRank) {
  expect_error([] { matmul(Tensor::zeros({4}), Tensor::zeros({4, 2})); }, {"[matmul]", "(4)", "(4, 2)"});
}
TEST(Errors, MatmulBatchMismatch) {
  expect_error([] { matmul(Tensor::zeros({2, 4, 3}), Tensor::zeros({3, 3, 2})); },
               {"[matmul]", "(2, 4, 3)", "(3, 3, 2)"});
}
TEST(Errors, BroadcastMismatch) {
  expect_error([] { add(Tensor::zeros({2, 3}), Tensor::zeros({4})); }, {"[add]", "(2, 3)", "(4)"});
  expect_error([] { mul(Tensor::zeros({2, 3}), Tensor::zeros({3, 3})); }, {"[mul]", "(2, 3)", "(3, 3)"});
}
TEST(Errors, BackwardOfNonScalarNeedsGradient) {
  Tensor x = Tensor::ones({2, 2}).set_requires_grad();
  expect_error([&] { exp(x).backward(); }, {"[backward]", "(2, 2)"});
  expect_error([&] { exp(x).backward(Tensor::ones({3})); }, {"[backward]", "(3)", "(2, 2)"});
}
TEST(Errors, LinearAndLayerNormShapes) {
  expect_error([] { linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})); }, {"[linear]", "(2, 3)", "(4, 5)"});
  expect_error([] { layer_norm(Tensor::zeros({2, 3}), Tensor::ones({4}), Tensor::zeros({4})); },
               {"[layer_norm]", "(4)", "(2, 3)"});
}
TEST(Errors, IndicesOutOfRange) {
  const std::vector<int32_t> ids{0, 5};
  expect_error([&] { embedding(Tensor::zeros({5, 2}), ids, Shape{2}); }, {"[embedding]", "5", "[0, 5)"});
  expect_error([&] { cross_entropy(Tensor::zeros({2, 5}), ids); }, {"[cross_entropy]", "5"});
  const std::vector<int32_t> three{0, 1, 2};
  expect_error([&] { cross_entropy(Tensor::zeros({2, 5}), three); }, {"[cross_entropy]", "(2, 5)", "3 targets"});
}
TEST(Errors, ShapeOps) {
  expect_error([] { reshape(Tensor::zeros({2, 3}), {4, 2}); }, {"[reshape]", "(2, 3)", "(4, 2)"});
  expect_error([] { concat({Tensor::zeros({2, 3}), Tensor::zeros({3, 3})}); }, {"[concat]", "(2, 3)", "(3, 3)"});
  expect_error([] { split(Tensor::zeros({2, 3}), {1, 1}); }, {"[split]", "(2, 3)"});
  expect_error([] { permute(Tensor::zeros({2, 3}), {0, 0}); }, {"[permute]", "(2, 3)"});
  expect_error([] { Rng r; dropout(Tensor::zeros({2}), 1.0f, true, r); }, {"[dropout]", "[0, 1)"});
}
// The row kernel subtracts max(x) * scale, the row's largest scaled score only when
// scale >= 0; a finite one is needed for any of it to mean anything.
TEST(Errors, CausalSoftmaxScale) {
  const Tensor scores = Tensor::zeros({2, 2});
  expect_error([&] { causal_softmax(scores, -1.0f); }, {"[causal_softmax]", "scale -1 "});
  expect_error([&] { causal_softmax(scores, std::nanf("")); }, {"[causal_softmax]", "scale nan "});
  expect_error([&] { causal_softmax(scores, INFINITY); }, {"[causal_softmax]", "scale inf "});
  EXPECT_NO_THROW(causal_softmax(scores, 0.0f));  // uniform over the visible keys
}

}  // namespace
}  // namespace folio
