// The model options (GPTConfig: pos, qk_norm, relu2, zero_init_proj, logit_softcap,
// tie_weights, bigram, x0_shortcut, value_embed, mtp, unet_skips): gradients with each
// one and with all of them, the decoder against the whole forward, the fast
// attention against the per-Head specification, weight tying's one parameter, the
// zero-initialised projections, parameter counts, replicas and bf16. Rope against its
// formula: test_rope.cpp; the U-net skips' pairing and the multi-token loss: their own
// files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "autograd/kernels/matmul.h"
#include "infer/decoder.h"
#include "tests/gradcheck.h"
#include "tests/option_values.h"
#include "tests/support.h"
#include "train/data_parallel.h"

namespace folio::nn {
namespace {

using folio::testing::gradcheck;
using folio::testing::param;
using V = std::vector<Tensor>;

GPTConfig tiny() {  // head size 4: even, as rope needs
  GPTConfig c;
  c.vocab_size = 7, c.block_size = 6, c.n_layer = 1, c.n_head = 2, c.n_embd = 8;
  c.activation = Activation::gelu;  // smooth: finite differences across ReLU's kink disagree with its gradient
  return c;
}

GPTConfig all_options(GPTConfig c = tiny()) {
  c.pos = Positions::rope, c.qk_norm = true, c.activation = Activation::relu2, c.zero_init_proj = true;
  c.logit_softcap = 2.0f, c.tie_weights = true, c.x0_shortcut = true, c.value_embed = true, c.mtp = 0.5f;
  c.gpt2_biases = true, c.ffn_hidden = 12.0f;
  c.unet_skips = true, c.n_layer = std::max<int64_t>(c.n_layer, 2);  // a pair needs two blocks
  return c;
}

// Each value of each option of the table alone on the tiny config, by name
// (tests/option_values.h: a row added later is here too), and the activations and
// combinations that are not one row's value. A value the tiny config cannot hold (the
// U-net skips need two blocks) gets three blocks: the last takes the first's output,
// the middle none.
std::vector<std::pair<std::string, GPTConfig>> each_option() {
  std::vector<std::pair<std::string, GPTConfig>> out;
  for (const ModelOption& o : model_options())
    for (GPTConfig c : folio::testing::other_values(o, tiny())) {
      std::string name = cat(o.key, "_", option_text(o, c));
      std::replace_if(name.begin(), name.end(), [](char ch) { return !std::isalnum(static_cast<unsigned char>(ch)); }, '_');
      try {
        c.validate();
      } catch (const Error&) {
        c.n_layer = 3;
      }
      out.emplace_back(name, c);
    }
  auto with = [&](const char* name, const std::function<void(GPTConfig&)>& set) {
    GPTConfig c = tiny();
    set(c);
    out.emplace_back(name, c);
  };
  with("relu2", [](GPTConfig& c) { c.activation = Activation::relu2; });
  with("gelu_tanh", [](GPTConfig& c) { c.activation = Activation::gelu_tanh; });
  with("gpt2_biases_tied", [](GPTConfig& c) { c.gpt2_biases = true, c.tie_weights = true; });
  with("ffn_hidden_swiglu", [](GPTConfig& c) { c.activation = Activation::swiglu, c.ffn_hidden = 6.0f; });
  return out;
}

// Every weight redrawn ~ N(0, stddev) (norms too): attention that is far from uniform,
// logits large enough for a soft cap of 2 to bend, and no zero projection that would
// leave the layers beneath it without a gradient to check.
void redraw(const GPT& gpt, float stddev, uint64_t seed) {
  Rng r(seed);
  for (const Tensor& p : gpt.parameters())
    for (int64_t i = 0; i < p.numel(); ++i) p.data()[i] = stddev * r.normal();
}

const std::vector<int32_t> kIds{1, 3, 5, 0, 6, 2, 2, 4, 0, 1}, kTargets{3, 5, 0, 6, 2, 2, 4, 1, 1, 5};

// The gradient checks run on a smaller model still (head size 2: one rotated pair),
// each forward pass being cheap: a check takes two per parameter.
GPTConfig for_gradcheck(GPTConfig c) {
  c.vocab_size = 5, c.n_embd = 4;
  return c;
}

class EachOption : public ::testing::TestWithParam<int> {};

TEST_P(EachOption, GradOfLoss) {
  const auto [name, c] = each_option()[size_t(GetParam())];
  GPT gpt(for_gradcheck(c));
  redraw(gpt, 0.6f, 3);
  const std::vector<int32_t> ids{1, 3, 4, 0, 2, 2, 4, 0, 1, 3}, targets{3, 4, 0, 2, 2, 4, 1, 1, 4, 0};
  const Rng::State masks = gpt.dropout_rng().state();  // every pass drops what the first does (--drop-path)
  EXPECT_TRUE(gradcheck([&](const V&) { return gpt.dropout_rng().set_state(masks), gpt.forward(ids, 2, 5, targets).loss; },
                        gpt.parameters()));
}
INSTANTIATE_TEST_SUITE_P(ModelOptions, EachOption, ::testing::Range(0, int(each_option().size())),
                         [](const auto& info) { return each_option()[size_t(info.param)].first; });

TEST(ModelOptions, GradOfLossAndLogitsWithAllOptions) {
  GPTConfig c = for_gradcheck(all_options());
  c.n_layer = 2;
  GPT gpt(c);
  redraw(gpt, 0.6f, 4);
  const std::vector<int32_t> ids{1, 3, 4, 0, 2, 2, 4, 0, 1, 3}, targets{3, 4, 0, 2, 2, 4, 1, 1, 4, 0};
  EXPECT_TRUE(gradcheck([&](const V&) { return gpt.forward(ids, 2, 5, targets).loss; }, gpt.parameters()));
  EXPECT_TRUE(gradcheck([&](const V&) { return gpt.forward(ids, 2, 5).logits; }, gpt.parameters()));
}

// Layers alone, with their input's gradient: the per-Head path and the feed-forward.
TEST(ModelOptions, HeadAndFeedForwardGrad) {
  const auto rotary = std::make_shared<const RotaryTables>(8, 4);
  Rng init(1);
  Head head(6, 4, 8, 0.0f, init, std::make_shared<Rng>(0), {.qk_norm = true, .rotary = rotary});
  for (const Tensor& p : head.parameters())
    for (int64_t i = 0; i < p.numel(); ++i) p.data()[i] *= 25.0f;
  V inputs = head.parameters();
  inputs.push_back(param({2, 5, 6}, 2));
  EXPECT_TRUE(gradcheck([&](const V& v) { return head.forward(v.back()); }, inputs));

  FeedForward ff(4, 0.0f, true, Activation::relu2, init);
  V ff_inputs = ff.parameters();
  ff_inputs.push_back(param({2, 3, 4}, 3));
  EXPECT_TRUE(gradcheck([&](const V& v) { return ff.forward(v.back()); }, ff_inputs));
}

// Generation's path, for every option the table has: the decoder's prefill of a
// prefix, then a step per token, gives the logits of one forward pass over the whole
// sequence (with rope, each cached key rotated at its own position).
TEST(ModelOptions, DecoderEqualsTheWholeForward) {
  std::vector<std::pair<std::string, GPTConfig>> cases = {{"all options", all_options()}};
  for (const auto& [name, c] : each_option()) cases.emplace_back(name, c);
  for (auto [name, c] : cases) {
    SCOPED_TRACE(name);
    c.block_size = 9, c.n_layer = std::max<int64_t>(c.n_layer, 2);
    GPT gpt(c);
    redraw(gpt, 0.3f, 5);
    gpt.eval();
    NoGradGuard no_grad;
    const std::vector<int32_t> ids{3, 1, 4, 1, 5, 0, 2, 6, 5, 3, 5, 2, 6, 0, 1, 4, 4, 2};  // B 2 x T 9
    const int64_t B = 2, T = 9, V = c.vocab_size;
    const Tensor whole = gpt.forward(ids, B, T).logits;  // (B, T, V)
    infer::Decoder decoder(gpt);
    for (int64_t b = 0; b < B; ++b) {
      const std::span<const int32_t> seq(ids.data() + b * T, size_t(T));
      constexpr int64_t kPrompt = 5;  // a prefill, then a step per token
      for (int64_t t = kPrompt - 1; t < T; ++t) {
        const std::span<const float> out = t == kPrompt - 1 ? decoder.restart(seq.first(kPrompt)) : decoder.step(seq[t]);
        for (int64_t v = 0; v < V; ++v)
          ASSERT_NEAR(out[size_t(v)], whole.at({b, t, v}), 2e-5f) << "sequence " << b << " position " << t;
      }
      EXPECT_EQ(decoder.length(), T);
    }
  }
}

// With rope the model has no position table, and order still matters. Without any
// positions, causal attention sees the earlier tokens as a set: swapping two of them
// would leave the last position's logits as they are. With rope it changes them.
// The bigram table's row for position t is (token t - 1, token t), and the first
// position's is (none, token 0): changing one row moves the logits from the first
// position that reads it on, and none before.
TEST(ModelOptions, BigramRowsArePairsOfPreviousAndCurrentToken) {
  GPTConfig c = tiny();
  c.bigram = true;
  GPT gpt(c);
  redraw(gpt, 0.3f, 9);
  gpt.eval();
  NoGradGuard no_grad;
  const std::vector<int32_t> ids{2, 5, 1, 4, 6, 3};  // (1, 6); the pair (1, 4) at t = 3 only, and never (4, 1)
  const int64_t V = c.vocab_size, C = c.n_embd, T = 6;
  EXPECT_EQ(gpt.bigram_embedding->weight.size(0), (V + 1) * V);
  const std::vector<float> before = gpt.forward(ids, 1, T).logits.to_vector();  // (1, T, V)
  auto first_moved = [&](int64_t row) {
    float* w = gpt.bigram_embedding->weight.data() + row * C;
    const std::vector<float> kept(w, w + C);
    for (int64_t i = 0; i < C; ++i) w[i] += 1.0f;
    gpt.bigram_embedding->weight.mark_modified();
    const std::vector<float> after = gpt.forward(ids, 1, T).logits.to_vector();
    std::copy(kept.begin(), kept.end(), w);
    gpt.bigram_embedding->weight.mark_modified();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t v = 0; v < V; ++v)
        if (after[size_t(t * V + v)] != before[size_t(t * V + v)]) return t;
    return T;
  };
  EXPECT_EQ(first_moved(1 * V + 4), 3);
  EXPECT_EQ(first_moved(4 * V + 1), T);  // the reversed pair is not in the text
  EXPECT_EQ(first_moved(V * V + 2), 0);  // (none, 2): the first position
  EXPECT_EQ(first_moved(V * V + 5), T);  // a later 5 has a previous token
  GPTConfig subwords = c;
  subwords.vocab_size = 2000;
  folio::testing::expect_error([&] { subwords.validate(); }, {"bigram", "2000", "1024"});
}

TEST(ModelOptions, RopeReplacesThePositionTable) {
  GPT gpt(all_options());
  EXPECT_EQ(gpt.position_embedding, nullptr);
  for (const auto& [name, t] : gpt.named_parameters()) EXPECT_EQ(name.find("position"), std::string::npos) << name;
  redraw(gpt, 0.3f, 6);
  NoGradGuard no_grad;
  const Tensor a = gpt.forward(std::vector<int32_t>{1, 2, 3}, 1, 3).logits;
  const Tensor b = gpt.forward(std::vector<int32_t>{2, 1, 3}, 1, 3).logits;
  float diff = 0.0f;
  for (int64_t v = 0; v < 7; ++v) diff = std::max(diff, std::abs(a.at({0, 2, v}) - b.at({0, 2, v})));
  EXPECT_GT(diff, 1e-4f);
}

TEST(ModelOptions, SoftCapBoundsTheLogits) {
  GPTConfig c = tiny();
  c.logit_softcap = 0.5f;
  GPT capped(c);
  redraw(capped, 2.0f, 7);  // raw logits far beyond 0.5
  c.logit_softcap = 0.0f;
  GPT raw(c);
  std::copy_n(capped.flat_parameters().data(), capped.flat_parameters().numel(), raw.flat_parameters().data());
  NoGradGuard no_grad;
  const Tensor a = capped.forward(kIds, 2, 5).logits, b = raw.forward(kIds, 2, 5).logits;
  float largest = 0.0f;
  for (int64_t i = 0; i < a.numel(); ++i) {
    ASSERT_NEAR(a.data()[i], 0.5f * std::tanh(b.data()[i] / 0.5f), 1e-6f);
    largest = std::max(largest, std::abs(b.data()[i]));
  }
  EXPECT_GT(largest, 1.0f);
}

// One parameter used twice: named once, and its gradient is the sum of the gradients
// an untied model with equal weights gives its embedding and its lm_head.
TEST(ModelOptions, TiedWeightIsOneParameterWithTheSummedGradient) {
  GPTConfig c = tiny();
  c.tie_weights = true;
  GPT tied(c);
  EXPECT_TRUE(tied.lm_head->weight.same(tied.token_embedding->weight));
  std::set<std::string> names;
  for (const auto& [name, t] : tied.named_parameters()) names.insert(name);
  EXPECT_FALSE(names.count("lm_head.weight"));
  EXPECT_TRUE(names.count("lm_head.bias"));
  c.tie_weights = false;
  GPT untied(c);
  EXPECT_EQ(untied.num_parameters() - tied.num_parameters(), c.vocab_size * c.n_embd);
  const NamedParameters tied_params = tied.named_parameters();
  std::map<std::string, Tensor> weights(tied_params.begin(), tied_params.end());
  weights["lm_head.weight"] = tied.token_embedding->weight;
  for (const auto& [name, p] : untied.named_parameters()) {
    ASSERT_TRUE(weights.count(name)) << name;
    std::copy_n(weights.at(name).data(), p.numel(), p.data());
  }
  tied.forward(kIds, 2, 5, kTargets).loss.backward();
  untied.forward(kIds, 2, 5, kTargets).loss.backward();
  const std::vector<float> got = tied.token_embedding->weight.grad().to_vector();
  const std::vector<float> emb = untied.token_embedding->weight.grad().to_vector();
  const std::vector<float> head = untied.lm_head->weight.grad().to_vector();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], emb[i] + head[i], 1e-6f) << i;
}

// The output projections start at zero; every other parameter has the values it has
// without the option (the zeroed ones are drawn all the same: same RNG order).
TEST(ModelOptions, ZeroInitProjectionsLeaveTheRestAsTheyWere) {
  GPTConfig c = tiny();
  c.n_layer = 2;
  const GPT plain(c);
  c.zero_init_proj = true;
  const GPT zeroed(c);
  const auto a = plain.named_parameters(), b = zeroed.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  int zero = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool proj = b[i].first.ends_with("attn.proj.weight") || b[i].first.ends_with("ffwd.proj.weight");
    zero += proj;
    for (int64_t j = 0; j < b[i].second.numel(); ++j) {
      if (proj) {
        ASSERT_EQ(b[i].second.data()[j], 0.0f) << b[i].first;
        ASSERT_FALSE(std::signbit(b[i].second.data()[j])) << b[i].first;
      } else {
        ASSERT_EQ(b[i].second.data()[j], a[i].second.data()[j]) << b[i].first;
      }
    }
  }
  EXPECT_EQ(zero, 4);
}

// A two-block model, and the same with an option that adds `added` parameters after
// all of the plain model's, which must be equal to them and in order.
struct OptionAdded {
  std::unique_ptr<GPT> plain, with;
  NamedParameters added;  // the option's own
};
OptionAdded option_added(const std::function<void(GPTConfig&)>& set, size_t added) {
  GPTConfig c = tiny();
  c.n_layer = 2;
  OptionAdded m;
  m.plain = std::make_unique<GPT>(c);
  set(c);
  m.with = std::make_unique<GPT>(c);
  const auto a = m.plain->named_parameters(), b = m.with->named_parameters();
  if (b.size() != a.size() + added) {
    ADD_FAILURE() << b.size() << " parameters, expected " << a.size() << " + " << added;
    return m;
  }
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(b[i].second.to_vector(), a[i].second.to_vector()) << b[i].first;
  m.added.assign(b.begin() + std::ptrdiff_t(a.size()), b.end());
  return m;
}

const std::vector<int32_t> kSixIds{1, 3, 5, 0, 6, 2};  // (1, 6); token 5 only at position 2
std::vector<float> logits_at(const GPT& gpt, int64_t t) {  // row t of the logits over kSixIds
  const std::vector<float> all = gpt.forward(kSixIds, 1, 6).logits.to_vector();
  const int64_t V = gpt.config().vocab_size;
  return {all.begin() + t * V, all.begin() + (t + 1) * V};
}

// The x0 shortcut starts as the model without it: the same weights, and zero gates
// last, so the same logits. A gate opened in the second block moves every position's
// logits (each position reads its own embedding).
TEST(ModelOptions, X0ShortcutStartsAsTheModelWithoutIt) {
  const OptionAdded m = option_added([](GPTConfig& c) { c.x0_shortcut = true; }, 2);
  ASSERT_EQ(m.added.size(), 2u);
  EXPECT_EQ(m.added[0].first, "x0_gates.0");
  EXPECT_EQ(m.added[1].second.to_vector(), std::vector<float>(size_t(tiny().n_embd), 0.0f));
  for (int64_t t = 0; t < 6; ++t) EXPECT_EQ(logits_at(*m.with, t), logits_at(*m.plain, t)) << "position " << t;
  m.with->x0_gates->gate[1].data()[0] = 0.5f;
  for (int64_t t = 0; t < 6; ++t) EXPECT_NE(logits_at(*m.with, t), logits_at(*m.plain, t)) << "position " << t;
}

// Value embeddings are drawn after every other weight, so the rest is as it was, and
// zeroed they leave the logits as they were. A token's vector in the second block
// moves the logits at its own position and every later one (attention carries a
// value forward, never back), and no earlier position's.
TEST(ModelOptions, ValueEmbeddingsReachTheirTokenAndWhatAttendsToIt) {
  const OptionAdded m = option_added([](GPTConfig& c) { c.value_embed = true; }, 2);
  ASSERT_EQ(m.added.size(), 2u);
  const int64_t V = tiny().vocab_size, C = tiny().n_embd;
  EXPECT_EQ(m.added[0].first, "value_embeddings.0.weight");
  EXPECT_EQ(m.added[1].second.shape(), (Shape{V, C}));
  for (const auto& [name, table] : m.added) std::fill_n(table.data(), table.numel(), 0.0f);
  for (int64_t t = 0; t < 6; ++t) EXPECT_EQ(logits_at(*m.with, t), logits_at(*m.plain, t)) << "position " << t;
  float* row = m.with->value_embeddings[1]->weight.data() + 5 * C;
  for (int64_t i = 0; i < C; ++i) row[i] = 0.3f - 0.1f * float(i % 5);
  for (int64_t t = 0; t < 6; ++t) {
    if (t < 2) EXPECT_EQ(logits_at(*m.with, t), logits_at(*m.plain, t)) << "position " << t;
    else EXPECT_NE(logits_at(*m.with, t), logits_at(*m.plain, t)) << "position " << t;
  }
}

TEST(ModelOptions, ParameterCountOfEveryCombination) {
  for (int bits = 0; bits < 4096; ++bits) {
    GPTConfig c = tiny();
    c.pos = bits & 1 ? Positions::rope : Positions::learned;
    c.qk_norm = bits & 2, c.zero_init_proj = bits & 4, c.tie_weights = bits & 8, c.bias = !(bits & 16);
    c.activation = bits & 32 ? Activation::relu2 : Activation::relu;
    c.bigram = bits & 64, c.x0_shortcut = bits & 128, c.value_embed = bits & 256;
    if (bits & 512) c.unet_skips = true, c.n_layer = 5;  // two pairs around a middle block
    c.mtp = bits & 1024 ? 0.5f : 0.0f;
    c.gpt2_biases = (bits & 2048) && c.bias;  // it needs bias
    c.ffn_hidden = bits & 4 ? 12.0f : 0.0f;      // with zero_init_proj: no bit of its own, 4096 cases are plenty
    const GPT gpt(c);
    EXPECT_EQ(c.parameter_count(), gpt.num_parameters()) << bits;
    EXPECT_EQ(gpt.flat_parameters().numel(), gpt.num_parameters()) << bits;
  }
}

// Replicas (threads' data parallelism) and bf16 build and run the options as the model does.
TEST(ModelOptions, DataParallelReplicasAndBf16) {
  GPTConfig c = all_options();
  c.block_size = 8, c.n_embd = 16, c.vocab_size = 11, c.n_layer = 2;
  GPT alone(c), split(c);
  redraw(alone, 0.2f, 8);
  std::copy_n(alone.flat_parameters().data(), alone.flat_parameters().numel(), split.flat_parameters().data());
  const int64_t B = 5, T = 8;
  std::vector<int32_t> ids(size_t(B * T)), targets(size_t(B * T));
  Rng r(9);
  for (auto& v : ids) v = int32_t(r.below(11));
  for (auto& v : targets) v = int32_t(r.below(11));
  const Tensor loss = alone.forward(ids, B, T, targets).loss;
  loss.backward();
  DataParallel dp(split, 2);
  EXPECT_NEAR(dp.forward_backward(ids, targets, B, T), loss.item(), 1e-5f);
  const float* want = alone.flat_parameters().grad_data();
  const float* got = split.flat_parameters().grad_data();
  for (int64_t i = 0; i < alone.num_parameters(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5f) << i;

  if (!kernels::bf16_native()) GTEST_SKIP() << "this CPU lacks AVX512-BF16";
  alone.set_precision(Precision::bf16);
  NoGradGuard no_grad;
  const float bf16 = alone.forward(ids, B, T, targets).loss.item();
  EXPECT_NEAR(bf16, loss.item(), 1e-2f * loss.item());
  EXPECT_NE(bf16, loss.item());
}

}  // namespace
}  // namespace folio::nn
