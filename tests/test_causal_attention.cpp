// causal_attention (the fused op) against the composition it replaces, q k^T ->
// causal_softmax -> @ v, forward values and all three gradients, at the model's shapes
// (whole vectors: no padding) and at odd ones (padded rows and columns); the same for
// position_qk_packed, which applies the attention options before it. The shared
// gradient check covers their derivatives on small inputs (autograd/gradcheck_ops.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"

namespace folio {
namespace {

// What the fused op replaces, and what it is checked against. With p > 0 the weights'
// dropout draws its seed from Rng(kDropSeed); the fused op gets that same draw.
constexpr uint64_t kDropSeed = 21;
Tensor composed(const Tensor& q, const Tensor& k, const Tensor& v, float scale, float p = 0.0f) {
  Rng rng(kDropSeed);
  return matmul(dropout(causal_softmax(matmul(q, k, false, true), scale), p, true, rng), v);
}
WeightDropout fused_dropout(float p) {
  Rng rng(kDropSeed);
  return {p, rng.next_u64()};
}

struct Result {
  Tensor y, dq, dk, dv;
};

Result run(const Shape& shape, float scale, bool fused, float p = 0.0f) {
  Rng r(11);
  Tensor q = Tensor::randn(shape, r).set_requires_grad(), k = Tensor::randn(shape, r).set_requires_grad(),
         v = Tensor::randn(shape, r).set_requires_grad();
  const Tensor g = Tensor::randn(shape, r);
  Tensor y = fused ? causal_attention(q, k, v, scale, fused_dropout(p)) : composed(q, k, v, scale, p);
  y.backward(g);
  return {y.detach(), q.grad(), k.grad(), v.grad()};
}

void expect_near(const Tensor& a, const Tensor& b, const char* what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  double worst = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) worst = std::max(worst, double(std::fabs(a.data()[i] - b.data()[i])));
  EXPECT_LT(worst, 2e-5) << what << ": largest difference " << worst;
}

void expect_same_as_composition(const Shape& shape, float scale, float p = 0.0f) {
  const Result fused = run(shape, scale, true, p), composed = run(shape, scale, false, p);
  expect_near(fused.y, composed.y, "y");
  expect_near(fused.dq, composed.dq, "dq");
  expect_near(fused.dk, composed.dk, "dk");
  expect_near(fused.dv, composed.dv, "dv");
}

TEST(CausalAttention, SameAsCompositionAtModelShapes) {
  expect_same_as_composition({2, 4, 64, 32}, 1.0f / std::sqrt(32.0f));  // config S: T 64, hs 32
  expect_same_as_composition({1, 2, 128, 64}, 0.125f);                  // the 10-minute recipe's T, M's hs
}

// The weights' dropout inside the op drops what dropout() drops from the composition's
// weights under the same seed (and scales the rest alike): values and gradients agree.
TEST(CausalAttention, SameAsCompositionWithDropout) {
  expect_same_as_composition({2, 4, 64, 32}, 1.0f / std::sqrt(32.0f), 0.2f);
  expect_same_as_composition({3, 37, 12}, 0.3f, 0.5f);  // padded
  // With p near 1 almost every weight is dropped: the scale 1 / (1 - p) must still agree.
  expect_same_as_composition({1, 2, 16, 16}, 0.25f, 0.9f);
}

TEST(CausalAttention, SameAsCompositionWhenPadded) {
  expect_same_as_composition({3, 37, 12}, 0.3f);  // T and hs not multiples of 16
  expect_same_as_composition({1, 1, 5}, 1.0f);    // one position
  expect_same_as_composition({2, 19, 16}, 0.0f);  // scale 0: uniform weights over the visible keys
}

// The packed op against per-head copies (select_heads), the composition, and the heads
// put side by side again: what MultiHead computes when the weights are asked for.
void expect_packed_same_as_composition(int64_t B, int64_t T, int64_t n_head, int64_t hs, float p = 0.0f) {
  const float scale = 1.0f / std::sqrt(float(hs));
  struct {
    Tensor y, dqkv;
  } got[2];
  for (const bool fused : {true, false}) {
    Rng r(12);
    Tensor qkv = Tensor::randn({B, T, n_head * 3 * hs}, r).set_requires_grad();
    const Tensor g = Tensor::randn({B, T, n_head * hs}, r);
    Tensor y;
    if (fused) {
      y = causal_attention_packed(qkv, n_head, scale, fused_dropout(p));
    } else {
      const int64_t stride = 3 * hs;
      const Tensor k = select_heads(qkv, n_head, hs, 0, stride), q = select_heads(qkv, n_head, hs, hs, stride),
                   v = select_heads(qkv, n_head, hs, 2 * hs, stride);
      const Tensor heads = composed(q, k, v, scale, p);  // (B, nh, T, hs)
      y = reshape(permute(heads, {0, 2, 1, 3}), {B, T, n_head * hs});
    }
    y.backward(g);
    got[fused ? 0 : 1] = {y.detach(), qkv.grad()};
  }
  expect_near(got[0].y, got[1].y, "y");
  expect_near(got[0].dqkv, got[1].dqkv, "dqkv");
}

TEST(CausalAttention, PackedSameAsComposition) {
  expect_packed_same_as_composition(2, 64, 4, 32);  // config S
  expect_packed_same_as_composition(3, 37, 2, 12);  // padded
  expect_packed_same_as_composition(2, 64, 4, 32, 0.2f);  // weights numbered (B, n_head, T, T)
  expect_packed_same_as_composition(3, 37, 2, 12, 0.4f);
}

// position_qk_packed against what it replaces: per-head copies of q and k, rms_norm,
// then rope; v copied. Values and the gradient of qkv through all three.
void expect_options_same_as_composition(int64_t B, int64_t T, int64_t n_head, int64_t hs, bool qk_norm,
                                        bool rotary) {
  Rng tables(14);
  const Tensor cos = rotary ? Tensor::uniform({T + 3, hs / 2}, tables, -1.0f, 1.0f) : Tensor{};  // (P, hs/2)
  const Tensor sin = rotary ? Tensor::uniform({T + 3, hs / 2}, tables, -1.0f, 1.0f) : Tensor{};
  const int64_t stride = 3 * hs;
  struct {
    Tensor k, q, v, dqkv;
  } got[2];
  for (const bool fused : {true, false}) {
    Rng r(13);
    Tensor qkv = Tensor::randn({B, T, n_head * stride}, r).set_requires_grad();  // (B, T, nh * 3 * hs)
    const Tensor gk = Tensor::randn({B, n_head, T, hs}, r), gq = Tensor::randn({B, n_head, T, hs}, r),
                 gv = Tensor::randn({B, n_head, T, hs}, r);
    auto options = [&](Tensor x) {
      if (qk_norm) x = rms_norm(x);
      return rotary ? rope(x, cos, sin, 0) : x;
    };
    const Tensor from = fused ? position_qk_packed(qkv, n_head, qk_norm, cos, sin) : qkv;
    Tensor k = select_heads(from, n_head, hs, 0, stride), q = select_heads(from, n_head, hs, hs, stride);
    const Tensor v = select_heads(from, n_head, hs, 2 * hs, stride);  // (B, nh, T, hs) each
    if (!fused) k = options(k), q = options(q);
    sum(k * gk + q * gq + v * gv).backward();
    got[fused ? 0 : 1] = {k.detach(), q.detach(), v.detach(), qkv.grad()};
  }
  expect_near(got[0].k, got[1].k, "k");
  expect_near(got[0].q, got[1].q, "q");
  expect_near(got[0].v, got[1].v, "v");
  expect_near(got[0].dqkv, got[1].dqkv, "dqkv");
}

TEST(CausalAttention, PositionOptionsPackedSameAsComposition) {
  for (const bool qk_norm : {false, true})
    for (const bool rotary : {false, true}) {
      SCOPED_TRACE(testing::Message() << "qk_norm " << qk_norm << ", rope " << rotary);
      expect_options_same_as_composition(2, 64, 4, 32, qk_norm, rotary);  // config S
      expect_options_same_as_composition(3, 37, 2, 12, qk_norm, rotary);  // odd sizes
    }
}

TEST(CausalAttention, SameOnOneThreadAndTwo) {  // with dropout: each slice numbers its own weights
  const Shape shape{2, 3, 40, 24};
  set_num_threads(1);
  const Result one = run(shape, 0.2f, true, 0.3f);
  set_num_threads(2);
  const Result two = run(shape, 0.2f, true, 0.3f);
  set_num_threads(0);
  for (int64_t i = 0; i < one.y.numel(); ++i) ASSERT_EQ(one.y.data()[i], two.y.data()[i]) << i;
  for (int64_t i = 0; i < one.dk.numel(); ++i) ASSERT_EQ(one.dk.data()[i], two.dk.data()[i]) << i;
}

TEST(CausalAttention, RefusesMismatchedInputs) {
  const Tensor a = Tensor::zeros({2, 4, 8}), b = Tensor::zeros({2, 5, 8});
  EXPECT_THROW(causal_attention(a, b, a, 1.0f), Error);
  EXPECT_THROW(causal_attention(a, a, a, 1.0f, {1.0f, 3}), Error);  // dropout p outside [0, 1)
  EXPECT_THROW(causal_attention_packed(Tensor::zeros({1, 4, 12}), 2, 1.0f, {-0.1f, 3}), Error);
  EXPECT_THROW(causal_attention(a, a, a, 1.0f, {std::nanf(""), 3}), Error);
  EXPECT_THROW(causal_attention(a, a, a, -1.0f), Error);
  EXPECT_THROW(causal_attention(Tensor::zeros({4}), Tensor::zeros({4}), Tensor::zeros({4}), 1.0f), Error);
  EXPECT_THROW(causal_attention_packed(Tensor::zeros({2, 4, 10}), 2, 1.0f), Error);  // 10 is not 2 x 3 x hs
  EXPECT_THROW(causal_attention_packed(Tensor::zeros({4, 12}), 2, 1.0f), Error);
  const Tensor tables = Tensor::zeros({4, 3});  // (P 4, hs/2 3): for hs 6
  EXPECT_THROW(position_qk_packed(Tensor::zeros({2, 4, 10}), 2, true, {}, {}), Error);  // 10 is not 2 x 3 x hs
  EXPECT_THROW(position_qk_packed(Tensor::zeros({2, 5, 36}), 2, false, tables, tables), Error);  // T 5 > P 4
  EXPECT_THROW(position_qk_packed(Tensor::zeros({2, 4, 24}), 2, false, tables, tables), Error);  // hs 4, not 6
  EXPECT_THROW(position_qk_packed(Tensor::zeros({2, 4, 36}), 2, false, tables, Tensor::zeros({4, 2})), Error);
  EXPECT_THROW(position_qk_packed(Tensor::zeros({2, 4, 36}), 2, true, {}, {}, 0.0f), Error);  // eps 0
}

}  // namespace
}  // namespace folio
