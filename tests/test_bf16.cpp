// bf16 matrix products above the kernel: the matmul and linear ops (forward and both
// gradients), a GPT in bf16, and data-parallel replicas that must follow the model.
// Finite differences cannot check bf16 gradients (rounding makes the function a
// staircase at any useful step), so each result is held against two fp32 oracles:
//  * the fp32 op on operands (and output gradient) rounded to bf16 first: that is
//    what bf16 mode computes, up to the order of the fp32 sums, so within 1e-5 of the
//    magnitude. An fp32 product anywhere (a forgotten backward) is ~1e-3 off.
//  * the fp32 op on the values as they are: within bf16's error, 2^-7 of the
//    magnitude (the same op over absolute values: sum |a||b|, + |bias|).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "tests/support.h"
#include "autograd/kernels/matmul.h"
#include "autograd/parallel.h"
#include "nn/attention.h"
#include "train/data_parallel.h"

namespace folio {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&, Precision)>;

Tensor leaf(const Shape& shape, uint64_t seed) {
  Rng r(seed);
  return Tensor::randn(shape, r).set_requires_grad();
}

Tensor mapped(const Tensor& t, float (*f)(float)) {
  std::vector<float> v = t.to_vector();
  for (float& x : v) x = f(x);
  return Tensor::from(t.shape(), v);
}
float rounded(float x) {
  kernels::bf16 y;
  kernels::to_bf16(&x, &y, 1);
  return kernels::to_float(y);
}
float absolute(float x) { return std::abs(x); }

struct Result {
  std::vector<std::vector<float>> values;  // the output, then each input's gradient
};

// f on fresh leaves holding `inputs`' values, differentiated with output gradient dC.
// Inputs listed in `keep` are passed as they are; the others through `map` (as dC).
Result run(const Fn& f, const std::vector<Tensor>& inputs, const Tensor& dC, Precision p, float (*map)(float),
           size_t mapped_inputs) {
  std::vector<Tensor> leaves;
  for (size_t i = 0; i < inputs.size(); ++i)
    leaves.push_back((map && i < mapped_inputs ? mapped(inputs[i], map) : inputs[i].clone()).set_requires_grad());
  const Tensor out = f(leaves, p);
  out.backward(map ? mapped(dC, map) : dC);
  Result r{{out.to_vector()}};
  for (const Tensor& l : leaves) r.values.push_back(l.grad().to_vector());
  return r;
}

// The first `products` inputs are matrix operands (rounded for the oracle); the rest
// (a bias) stay fp32 in bf16 mode, and their gradient is fp32 arithmetic on dC.
void expect_bf16_op(const Fn& f, const std::vector<Tensor>& inputs, size_t products = 2) {
  const Tensor out = f(inputs, Precision::fp32);
  Rng r(99);
  const Tensor dC = Tensor::randn(out.shape(), r);
  const Result bf16 = run(f, inputs, dC, Precision::bf16, nullptr, 0);
  const Result on_rounded = run(f, inputs, dC, Precision::fp32, rounded, products);
  const Result fp32 = run(f, inputs, dC, Precision::fp32, nullptr, 0);
  const Result scale = run(f, inputs, dC, Precision::fp32, absolute, inputs.size());
  for (size_t k = 0; k < bf16.values.size(); ++k) {
    const char* what = k == 0 ? "output" : "gradient of input ";
    const bool product = k == 0 || k <= products;  // a bias gradient is exact fp32 arithmetic
    const std::vector<float>& tight = product ? on_rounded.values[k] : fp32.values[k];
    for (size_t i = 0; i < bf16.values[k].size(); ++i) {
      const float got = bf16.values[k][i], s = scale.values[k][i];
      ASSERT_NEAR(got, tight[i], 1e-5f * s) << what << (k ? std::to_string(k - 1) : "") << " element " << i
                                            << " vs the fp32 op on rounded operands";
      ASSERT_NEAR(got, fp32.values[k][i], 1.01f * std::ldexp(1.0f, -7) * s)
          << what << (k ? std::to_string(k - 1) : "") << " element " << i << " vs fp32";
    }
  }
}

TEST(Bf16Ops, MatmulEveryLayout) {
  FOLIO_SKIP_WITHOUT_BF16();
  auto mm = [](bool ta, bool tb) {
    return Fn([=](const std::vector<Tensor>& v, Precision p) { return matmul(v[0], v[1], ta, tb, p); });
  };
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      SCOPED_TRACE(::testing::Message() << "ta " << ta << " tb " << tb);
      auto a = [&](int64_t b, int64_t m, int64_t k, uint64_t seed) {
        return b ? leaf(ta ? Shape{b, k, m} : Shape{b, m, k}, seed) : leaf(ta ? Shape{k, m} : Shape{m, k}, seed);
      };
      auto w = [&](int64_t b, int64_t k, int64_t n, uint64_t seed) {
        return b ? leaf(tb ? Shape{b, n, k} : Shape{b, k, n}, seed) : leaf(tb ? Shape{n, k} : Shape{k, n}, seed);
      };
      expect_bf16_op(mm(ta, tb), {a(0, 7, 13, 1), w(0, 13, 5, 2)});      // 2-D
      expect_bf16_op(mm(ta, tb), {a(6, 16, 32, 3), w(6, 32, 16, 4)});    // batched, as attention
      expect_bf16_op(mm(ta, tb), {a(4, 24, 40, 5), w(0, 40, 12, 6)});    // against a broadcast weight
      expect_bf16_op(mm(ta, tb), {a(0, 9, 20, 7), w(3, 20, 11, 8)});     // broadcast on the left
    }
  // One tensor on both sides (q @ q^T): its two gradient contributions add up.
  expect_bf16_op([](const std::vector<Tensor>& v, Precision p) { return matmul(v[0], v[0], false, true, p); },
                 {leaf({3, 10, 24}, 9)}, 1);
}

TEST(Bf16Ops, LinearAtTheModelsShapes) {
  FOLIO_SKIP_WITHOUT_BF16();
  const Fn lin = [](const std::vector<Tensor>& v, Precision p) { return linear(v[0], v[1], v[2], p); };
  expect_bf16_op(lin, {leaf({12, 64, 128}, 1), leaf({384, 128}, 2), leaf({384}, 3)});  // S: packed q/k/v
  expect_bf16_op(lin, {leaf({6, 64, 512}, 4), leaf({128, 512}, 5), leaf({128}, 6)});   // feed-forward proj
  expect_bf16_op([](const std::vector<Tensor>& v, Precision p) { return linear(v[0], v[1], {}, p); },
                 {leaf({5, 33}, 7), leaf({17, 33}, 8)});
}

// The feed-forward's fc with its fused ReLU in bf16 (the ReLU's mask read in the gradient's
// one pass): the bf16 Linear, then the ReLU as its own op, to fp32 rounding. (Against the
// fp32 op the ReLU's kink breaks bf16's tolerance: an output near 0 may change sign.)
TEST(Bf16Ops, LinearReluIsLinearThenRelu) {
  FOLIO_SKIP_WITHOUT_BF16();
  const std::vector<Tensor> in = {leaf({6, 64, 128}, 9), leaf({512, 128}, 10), leaf({512}, 11)};
  Rng r(12);
  const Tensor dC = Tensor::randn({6, 64, 512}, r);
  std::vector<std::vector<float>> got, want;
  for (const bool fused : {true, false}) {
    std::vector<Tensor> v;
    for (const Tensor& t : in) v.push_back(t.clone().set_requires_grad());
    const Tensor out = fused ? linear_relu(v[0], v[1], v[2], Precision::bf16)
                             : relu(linear(v[0], v[1], v[2], Precision::bf16));
    out.backward(dC);
    auto& into = fused ? got : want;
    into.push_back(out.to_vector());
    for (const Tensor& t : v) into.push_back(t.grad().to_vector());
  }
  for (size_t k = 0; k < got.size(); ++k)
    for (size_t i = 0; i < got[k].size(); ++i)
      ASSERT_NEAR(got[k][i], want[k][i], 1e-5f * (1.0f + std::abs(want[k][i]))) << "result " << k << " element " << i;
}

// The forward rounds each operand once and keeps it for the backward, which rounds only
// dC: a product's forward + backward rounds A, B and dC once each. (Rounding A and B
// again in the backward, as before, is M K + N K more: the same values, bit for bit.)
TEST(Bf16Ops, EachOperandIsRoundedOnce) {
  FOLIO_SKIP_WITHOUT_BF16();
  const int64_t M = 24, K = 40, N = 12;
  const Tensor x = leaf({M, K}, 1), w = leaf({N, K}, 2), b = leaf({N}, 3);
  for (const bool relu : {false, true}) {
    const int64_t before = kernels::bf16_rounded();
    sum(relu ? linear_relu(x, w, b, Precision::bf16) : linear(x, w, b, Precision::bf16)).backward();
    EXPECT_EQ(kernels::bf16_rounded() - before, M * K + N * K + M * N) << "relu " << relu;
  }
  const Tensor q = leaf({6, 16, 32}, 4), k = leaf({6, 16, 32}, 5);  // attention's scores, q k^T
  const int64_t before = kernels::bf16_rounded();
  sum(matmul(q, k, false, true, Precision::bf16)).backward();
  EXPECT_EQ(kernels::bf16_rounded() - before, 2 * 6 * 16 * 32 + 6 * 16 * 16);
}

// A bf16 Linear's backward reads its output gradient through one fused pass (the ReLU's
// mask, the rounding, the bias's column sums): bit for bit the three plain passes, on
// one thread and on two (by column chunks, each column's sum in row order), with a
// width that leaves a partial chunk.
TEST(Bf16Ops, FusedGradientPassEqualsThePlainPasses) {
  const int64_t rows = 300, N = 300;
  Rng r(7);
  const std::vector<float> g = Tensor::randn({rows, N}, r).to_vector(), y = Tensor::randn({rows, N}, r).to_vector();
  const std::vector<float> bias0 = Tensor::randn({N}, r).to_vector();
  for (const bool relu : {false, true}) {
    std::vector<float> d(g), want_bias(bias0);
    if (relu)
      for (size_t i = 0; i < d.size(); ++i) d[i] = y[i] > 0.0f ? g[i] : 0.0f;
    std::vector<kernels::bf16> want(d.size());
    kernels::detail::to_bf16_plain(d.data(), want.data(), int64_t(d.size()));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < N; ++j) want_bias[size_t(j)] += d[size_t(i * N + j)];
    for (const int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "relu " << relu << ", threads " << threads);
      const int before = num_threads();
      set_num_threads(threads);
      std::vector<kernels::bf16> got(d.size());
      std::vector<float> bias(bias0);
      kernels::to_bf16_gradient(g.data(), relu ? y.data() : nullptr, rows, N, got.data(), bias.data());
      set_num_threads(before);
      ASSERT_EQ(got, want);
      ASSERT_EQ(bias, want_bias);
    }
  }
}

nn::GPTConfig small_config() {
  return {.vocab_size = 11, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 32, .seed = 5};
}

std::vector<int32_t> tokens(int64_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<int32_t> v(size_t(n), 0);
  for (auto& x : v) x = int32_t(r.below(11));
  return v;
}

std::vector<float> gradient(const nn::GPT& m) {
  const Tensor& flat = m.flat_parameters();
  return {flat.grad_data(), flat.grad_data() + flat.numel()};
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) diff += std::pow(double(got[i]) - want[i], 2), norm += std::pow(double(want[i]), 2);
  return std::sqrt(diff / norm);
}

// Every product of a step (forward and backward, of every layer) follows the model's
// precision, on the data-parallel replicas' threads too.
TEST(Bf16Model, EveryProductRunsInTheModelsPrecision) {
  FOLIO_SKIP_WITHOUT_BF16();
  const int64_t B = 4, T = 16;
  const auto x = tokens(B * T, 1), y = tokens(B * T, 2);
  nn::GPT model(small_config());
  DataParallel dp(model, 2);
  for (const Precision p : {Precision::bf16, Precision::fp32}) {
    SCOPED_TRACE(to_string(p));
    model.set_precision(p);
    for (const bool parallel : {false, true}) {
      const kernels::MatmulCalls before = kernels::matmul_calls();
      const AttentionCalls attention_before = causal_attention_calls();
      if (parallel) dp.forward_backward(x, y, B, T);
      else model.forward(x, B, T, y).loss.backward();
      const kernels::MatmulCalls after = kernels::matmul_calls();
      const AttentionCalls attention_after = causal_attention_calls();
      const int64_t bf16 = after.bf16 - before.bf16, fp32 = after.fp32 - before.fp32;
      // Per block 4 forward products (q/k/v, proj, fc, proj) and 8 backward ones, +
      // lm_head's 3: per shard. The attention's six products are inside causal_attention,
      // one call a block and shard, in fp32 at this short context (nn/attention.h).
      EXPECT_EQ(bf16 + fp32, (parallel ? 2 : 1) * (12 * 2 + 3)) << "parallel " << parallel;
      EXPECT_EQ(p == Precision::bf16 ? fp32 : bf16, 0) << "parallel " << parallel;
      EXPECT_EQ(attention_after.fp32 - attention_before.fp32, (parallel ? 2 : 1) * 2) << "parallel " << parallel;
      EXPECT_EQ(attention_after.bf16 - attention_before.bf16, 0) << "parallel " << parallel;
    }
  }
}

// From kBf16AttentionFromT on, a bf16 model's attention runs in bf16 too, on the
// data-parallel replicas' threads as well; an fp32 model's never does.
TEST(Bf16Model, AttentionRunsInBf16FromLongContexts) {
  EXPECT_EQ(nn::attention_precision(Precision::bf16, nn::kBf16AttentionFromT - 1), Precision::fp32);
  EXPECT_EQ(nn::attention_precision(Precision::bf16, nn::kBf16AttentionFromT), Precision::bf16);
  EXPECT_EQ(nn::attention_precision(Precision::fp32, nn::kBf16AttentionFromT), Precision::fp32);
  FOLIO_SKIP_WITHOUT_BF16();
  const int64_t B = 2, T = nn::kBf16AttentionFromT;
  nn::GPTConfig config = small_config();
  config.block_size = T;
  nn::GPT model(config);
  DataParallel dp(model, 2);
  model.set_precision(Precision::bf16);
  const AttentionCalls before = causal_attention_calls();
  dp.forward_backward(tokens(B * T, 5), tokens(B * T, 6), B, T);
  const AttentionCalls after = causal_attention_calls();
  EXPECT_EQ(after.bf16 - before.bf16, 2 * config.n_layer);  // a call per block and replica
  EXPECT_EQ(after.fp32 - before.fp32, 0);
}

// The whole model: loss and gradient near fp32's, and not equal to it (bf16 did run).
TEST(Bf16Model, GPTLossAndGradientNearFp32) {
  FOLIO_SKIP_WITHOUT_BF16();
  const int64_t B = 4, T = 16;
  const auto x = tokens(B * T, 1), y = tokens(B * T, 2);
  nn::GPT fp32(small_config()), bf16(small_config());
  bf16.set_precision(Precision::bf16);
  const Tensor l32 = fp32.forward(x, B, T, y).loss, l16 = bf16.forward(x, B, T, y).loss;
  l32.backward();
  l16.backward();
  EXPECT_NEAR(l16.item(), l32.item(), 1e-3f * l32.item());
  const double err = relative_error(gradient(bf16), gradient(fp32));
  // Measured 2.4% (every parameter between 0.03% and 6%: rounding compounds through the
  // layers backward), 3e-5 on the loss.
  EXPECT_LT(err, 5e-2) << "relative L2 error of the gradient";
  EXPECT_GT(err, 1e-4) << "the gradients are fp32's: the products did not run in bf16";
}

// Replicas on other threads compute in bf16 when the model does, even when it is
// switched after the replicas exist: the data-parallel gradient equals the model's
// own bf16 gradient to fp32 rounding, where fp32 replicas would be ~1e-3 off.
TEST(Bf16Model, DataParallelReplicasFollowTheModel) {
  FOLIO_SKIP_WITHOUT_BF16();
  const int64_t B = 4, T = 16;
  const auto x = tokens(B * T, 3), y = tokens(B * T, 4);
  nn::GPT alone(small_config()), split(small_config());
  DataParallel dp(split, 2);
  alone.set_precision(Precision::bf16);
  split.set_precision(Precision::bf16);
  const float want = alone.forward(x, B, T, y).loss.item();
  alone.forward(x, B, T, y).loss.backward();
  EXPECT_NEAR(dp.forward_backward(x, y, B, T), want, 1e-5f);
  EXPECT_LT(relative_error(gradient(split), gradient(alone)), 1e-5);
}

}  // namespace
}  // namespace folio
