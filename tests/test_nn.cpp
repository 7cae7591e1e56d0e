// Layers and the GPT: the fast attention path against the per-Head specification,
// causality, dropout, seed vectors, and the PyTorch parameter count. Their gradients
// are checked by the registry (nn/gradcheck_layers.cpp, run by tests/test_gradcheck.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "nn/transformer.h"

namespace folio::nn {
namespace {

using V = std::vector<Tensor>;

GPTConfig tiny_config() {
  GPTConfig c;
  c.vocab_size = 7, c.block_size = 6, c.n_layer = 2, c.n_head = 2, c.n_embd = 8;
  return c;
}

// mh's output for x0, x0's gradient and every parameter's gradient, after a backward
// from a fixed random weighting of the output; forward(x) runs the path under test.
template <class Forward>
V output_and_grads(const MultiHead& mh, const Tensor& x0, Forward forward) {
  mh.zero_grad();
  Tensor x = x0.clone().set_requires_grad();
  Tensor y = forward(x);
  Rng rr(9);
  sum(mul(y, Tensor::randn(y.shape(), rr))).backward();
  V grads{y.detach(), x.grad()};
  for (const Tensor& p : mh.parameters()) grads.push_back(p.grad().clone());
  return grads;
}

void expect_all_near(const V& a, const V& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    for (int64_t j = 0; j < a[i].numel(); ++j)
      ASSERT_NEAR(a[i].data()[j], b[i].data()[j], 1e-5f) << "tensor " << i << " element " << j;
}

// The fast MultiHead (one packed projection; QK-norm and rotation over B * n_head)
// equals running its Head modules one by one: output and every gradient.
TEST(MultiHead, FastPathEqualsHeadByHead) {
  const auto rotary = std::make_shared<const RotaryTables>(16, 4);
  for (const BlockOptions& options : {BlockOptions{}, BlockOptions{.qk_norm = true}, BlockOptions{.rotary = rotary},
                                      BlockOptions{.qk_norm = true, .rotary = rotary},
                                      BlockOptions{.qk_norm = true, .rotary = rotary, .qkv_bias = true}}) {
    SCOPED_TRACE(::testing::Message() << "qk_norm " << options.qk_norm << " rope " << bool(options.rotary)
                                      << " qkv_bias " << options.qkv_bias);
    Rng init(7);
    MultiHead mh(12, 3, 4, 16, 0.0f, true, init, std::make_shared<Rng>(0), options);
    if (options.qkv_bias) {  // (3 * 3 * 4): each head's k, q and v biases told apart
      Rng br(10);
      for (int64_t i = 0; i < mh.qkv_bias().numel(); ++i) mh.qkv_bias().data()[i] = br.normal();
    }
    Rng xr(8);
    const Tensor x0 = Tensor::randn({3, 10, 12}, xr);
    expect_all_near(output_and_grads(mh, x0, [&](const Tensor& x) { return mh.forward(x); }),
                    output_and_grads(mh, x0, [&](const Tensor& x) { return mh.forward_heads(x); }));
  }
}

// In training with dropout on the weights, the fused attention (taken when the weights
// are not asked for) equals the composition (taken when they are): one draw from the
// shared generator drops the same weights in both. Output and every gradient.
TEST(MultiHead, FusedDropoutEqualsComposition) {
  for (const BlockOptions& options : {BlockOptions{}, BlockOptions{.qk_norm = true}}) {  // packed, and not
    SCOPED_TRACE(::testing::Message() << "qk_norm " << options.qk_norm);
    Rng init(7);
    const auto drops = std::make_shared<Rng>(0);
    MultiHead mh(12, 3, 4, 16, 0.3f, true, init, drops, options);
    Rng xr(8);
    const Tensor x0 = Tensor::randn({3, 10, 12}, xr);
    auto run = [&](bool fused) {  // the same draws for both paths
      drops->reseed(5);
      return output_and_grads(mh, x0, [&](const Tensor& x) {
        Tensor weights;
        return fused ? mh.forward(x) : mh.forward(x, &weights);
      });
    };
    expect_all_near(run(true), run(false));
  }
}

TEST(MultiHead, HeadWeightsAreViewsOfOnePackedMatrix) {
  Rng init(1);
  MultiHead mh(8, 2, 4, 8, 0.0f, false, init);
  const float* base = mh.heads[0]->key->weight.data();
  EXPECT_EQ(mh.heads[0]->query->weight.data(), base + 4 * 8);
  EXPECT_EQ(mh.heads[1]->key->weight.data(), base + 3 * 4 * 8);
}

TEST(GPT, Causality) {  // changing token t never changes logits at positions < t
  GPTConfig c = tiny_config();
  c.block_size = 8;
  GPT gpt(c);
  std::vector<int32_t> ids{1, 2, 3, 4, 5, 6, 0, 1};
  const Tensor before = gpt.forward(ids, 1, 8).logits;
  for (int t = 0; t < 8; ++t) {
    std::vector<int32_t> changed = ids;
    changed[t] = (changed[t] + 3) % 7;
    const Tensor after = gpt.forward(changed, 1, 8).logits;
    for (int s = 0; s < 8; ++s) {
      float diff = 0;
      for (int v = 0; v < 7; ++v) diff = std::max(diff, std::abs(after.at({0, s, v}) - before.at({0, s, v})));
      if (s < t) {
        EXPECT_EQ(diff, 0.0f) << "position " << s << " changed with token " << t;
      } else if (s == t) {
        EXPECT_GT(diff, 0.0f) << "position " << s << " ignores its own token";
      }
    }
  }
}

TEST(Dropout, IdentityWhenOffOrZero) {
  Rng r(1);
  const Tensor x = Tensor::randn({100}, r);
  Dropout zero(0.0f);
  EXPECT_TRUE(zero.forward(x).same(x));
  Dropout half(0.5f);
  half.eval();
  EXPECT_EQ(half.forward(x).to_vector(), x.to_vector());
}

// What a fused op gets in forward()'s place: forward()'s one draw when it would drop,
// and nothing -- no draw, so every later mask stays where it was -- when it would not.
TEST(Dropout, FusedDrawsAsForwardWould) {
  const auto rng = std::make_shared<Rng>(3);
  Dropout on(0.25f, rng), zero(0.0f, rng), off(0.25f, rng);
  off.eval();
  const Rng::State before = rng->state();
  EXPECT_EQ(zero.fused().p, 0.0f);
  EXPECT_EQ(off.fused().p, 0.0f);
  EXPECT_EQ(rng->state(), before);
  const WeightDropout w = on.fused();
  Rng expected(3);
  EXPECT_EQ(w.p, 0.25f);
  EXPECT_EQ(w.seed, expected.next_u64());
  EXPECT_EQ(rng->state(), expected.state());
}

TEST(Dropout, KeepsAboutOneMinusPScaled) {
  const float p = 0.3f;
  Dropout d(p, std::make_shared<Rng>(5));
  const Tensor y = d.forward(Tensor::ones({100000}));
  int64_t kept = 0;
  for (float v : y.to_vector()) {
    if (v != 0.0f) {
      ++kept;
      ASSERT_FLOAT_EQ(v, 1.0f / (1.0f - p));
    }
  }
  EXPECT_NEAR(double(kept) / 100000.0, 1.0 - p, 0.01);
}

TEST(Dropout, SeedReproducesMask) {
  Dropout a(0.5f, std::make_shared<Rng>(11)), b(0.5f, std::make_shared<Rng>(11)), c(0.5f, std::make_shared<Rng>(12));
  const Tensor x = Tensor::ones({256});
  EXPECT_EQ(a.forward(x).to_vector(), b.forward(x).to_vector());
  EXPECT_NE(a.forward(x).to_vector(), c.forward(x).to_vector());
}

// self-attention-from-scratch.txt: the embedded sentence and W_query, W_key, W_value.
TEST(Seeds, SelfAttentionFromScratch) {
  const Tensor x = Tensor::from({8, 2}, std::vector<float>{0.3374f, -0.1778f, 0.1794f, 1.8951f, 0.3486f, 0.6603f,
                                                           0.4954f, 0.2692f, 0.6984f, -1.4097f, 0.7671f, -1.1925f,
                                                           0.3486f, 0.6603f, -0.2196f, -0.3792f});
  const Tensor wq = Tensor::from({3, 2}, std::vector<float>{0.2961f, 0.5166f, 0.2517f, 0.6886f, 0.0740f, 0.8665f});
  const Tensor wk = Tensor::from({3, 2}, std::vector<float>{0.1366f, 0.1025f, 0.1841f, 0.7264f, 0.3153f, 0.6871f});
  const Tensor wv = Tensor::from(
      {4, 2}, std::vector<float>{0.0756f, 0.1966f, 0.3164f, 0.4017f, 0.1186f, 0.8274f, 0.3821f, 0.6605f});
  auto expect = [](const Tensor& t, std::vector<float> printed) {
    ASSERT_EQ(t.numel(), int64_t(printed.size()));
    // The printed inputs carry 4 decimals; their rounding moves results by up to ~2e-4.
    for (size_t i = 0; i < printed.size(); ++i) EXPECT_NEAR(t.data()[i], printed[i], 2.5e-4f) << i;
  };
  const Tensor keys = linear(x, wk), values = linear(x, wv), queries = linear(x, wq);
  expect(keys, {0.0279f, -0.0671f, -0.0158f, 0.2187f, 1.4097f, 1.3587f, 0.1153f, 0.5439f, 0.5636f, 0.0953f, 0.2867f,
                0.3412f, -0.0491f, -0.8956f, -0.7485f, -0.0174f, -0.7251f, -0.5775f, 0.1153f, 0.5439f, 0.5636f,
                -0.0689f, -0.3159f, -0.3298f});
  expect(values, {-0.0094f, 0.0353f, -0.1071f, 0.0115f, 0.3862f, 0.8181f, 1.5893f, 1.3203f, 0.1562f, 0.3756f,
                  0.5877f, 0.5693f, 0.0904f, 0.2649f, 0.2815f, 0.3671f, -0.2244f, -0.3454f, -1.0836f, -0.6643f,
                  -0.1765f, -0.2364f, -0.8957f, -0.4945f, 0.1562f, 0.3756f, 0.5877f, 0.5693f, -0.0912f, -0.2218f,
                  -0.3398f, -0.3344f});
  const Tensor query_2 = split(reshape(queries, {1, 24}), {3, 3, 18})[1];  // row 1: (1, 3)
  expect(query_2, {1.0321f, 1.3501f, 1.6555f});
  const Tensor weights_2 = softmax(scale(matmul(query_2, keys, false, true), 1.0f / std::sqrt(3.0f)));
  expect(weights_2, {0.0432f, 0.5687f, 0.1273f, 0.0832f, 0.0107f, 0.0147f, 0.1273f, 0.0249f});
  expect(matmul(weights_2, values), {0.2593f, 0.5718f, 1.0390f, 0.9041f});
}

TEST(GPT, ParameterCountMatchesPyTorchReference) {
  GPTConfig c;  // 4L / 4H / 128d / block 64 / vocab 65, biases on
  c.activation = Activation::relu;
  EXPECT_EQ(GPT(c).num_parameters(), 816705);
  EXPECT_EQ(c.parameter_count(), 816705);
  c.bias = false, c.n_layer = 2, c.n_head = 3, c.n_embd = 48, c.vocab_size = 11;
  EXPECT_EQ(c.parameter_count(), GPT(c).num_parameters());
}

TEST(GPT, StableDottedNames) {
  GPT gpt(tiny_config());
  std::set<std::string> names;
  for (const auto& [name, t] : gpt.named_parameters()) names.insert(name);
  for (const char* n : {"token_embedding.weight", "position_embedding.weight", "blocks.0.ln1.weight",
                        "blocks.1.attn.heads.1.query.weight", "blocks.0.attn.proj.bias", "blocks.1.ffwd.fc.weight",
                        "blocks.1.ffwd.proj.bias", "ln_f.bias", "lm_head.weight", "lm_head.bias"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_FALSE(names.count("blocks.0.attn.heads.0.query.bias"));
  EXPECT_EQ(names.size(), gpt.named_parameters().size());
  EXPECT_EQ(gpt.flat_parameters().numel(), gpt.num_parameters());
}

TEST(GPT, FreshModelLossIsLnVocab) {
  GPTConfig c;
  c.n_layer = 2, c.n_embd = 64;
  GPT gpt(c);
  Rng r(3);
  std::vector<int32_t> ids(4 * 64), targets(4 * 64);
  for (auto& v : ids) v = int32_t(r.below(65));
  for (auto& v : targets) v = int32_t(r.below(65));
  NoGradGuard no_grad;
  EXPECT_NEAR(gpt.forward(ids, 4, 64, targets).loss.item(), std::log(65.0), 0.1);
}

TEST(GPT, InitialisationFollowsTheRecipe) {
  GPTConfig c;
  c.n_layer = 2;
  GPT gpt(c);
  double sq = 0;
  int64_t n = 0;
  for (const auto& [name, t] : gpt.named_parameters()) {
    const auto v = t.to_vector();
    if (name.ends_with("bias")) {
      for (float x : v) ASSERT_EQ(x, 0.0f) << name;
    } else if (name.find("ln") != std::string::npos) {
      for (float x : v) ASSERT_EQ(x, 1.0f) << name;
    } else {
      for (float x : v) sq += double(x) * x;
      n += int64_t(v.size());
    }
  }
  EXPECT_NEAR(std::sqrt(sq / double(n)), 0.02, 0.0005);  // pooled over ~400k weights
}

}  // namespace
}  // namespace folio::nn
