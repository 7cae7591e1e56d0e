// The one-token decoder (infer/decoder.h) against the model it decodes: at every
// position, its logits are GPT::forward's over the same prefix.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "infer/decoder.h"
#include "support.h"

namespace folio {
namespace {

using testing::expect_error;

struct DecoderCase {
  const char* name;
  nn::GPTConfig config;
  Precision dtype;
  float tol;  // max |decoder - forward| over the logits
  nn::Weights weights = nn::Weights::f32;
};
void PrintTo(const DecoderCase& c, std::ostream* os) { *os << c.name; }

// Logits of forward over ids[0, T) at position T - 1.
std::vector<float> forward_last(const nn::GPT& gpt, std::span<const int32_t> ids) {
  const int64_t T = int64_t(ids.size()), V = gpt.config().vocab_size;
  const Tensor logits = gpt.forward(ids, 1, T).logits;
  return {logits.data() + (T - 1) * V, logits.data() + T * V};
}

float max_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

// The x0 shortcut's gates start at zero, where the decoder could ignore them and
// still agree, and the U-net skips' at 1, where it could swap two: give each gate
// values of its own.
void open_gates(nn::GPT& gpt) {
  float shift = 0.0f;
  for (const auto& gates : {gpt.x0_gates, gpt.skip_gates})
    if (gates)
      for (const Tensor& gate : gates->gate) {
        for (int64_t i = 0; i < gate.numel(); ++i) gate.data()[i] = 0.5f - 0.1f * float(i % 9) + shift;
        shift += 0.3f;
      }
}

class DecoderMatchesForward : public ::testing::TestWithParam<DecoderCase> {
 protected:
  void SetUp() override {
    if (GetParam().dtype == Precision::bf16) {
      FOLIO_SKIP_WITHOUT_BF16();
    }
  }
};

// Biases start at zero, where a product could add the wrong one and agree: give each
// a value of its own.
void set_biases(nn::GPT& gpt) {
  int64_t n = 0;
  for (const auto& [name, p] : gpt.named_parameters())
    if (name.ends_with(".bias") && name.find("ln") == std::string::npos)
      for (int64_t i = 0; i < p.numel(); ++i) p.data()[i] = 0.05f * float((n++ * 7) % 11) - 0.25f;
}

// The case's model, its gates opened and biases set, in eval mode at the case's precision.
std::unique_ptr<nn::GPT> model_for(const DecoderCase& c) {
  auto gpt = std::make_unique<nn::GPT>(c.config);
  open_gates(*gpt);
  set_biases(*gpt);
  gpt->eval();
  gpt->set_precision(c.dtype);
  return gpt;
}

TEST_P(DecoderMatchesForward, AtEveryPositionAfterEveryRestart) {
  const DecoderCase& c = GetParam();
  const std::unique_ptr<nn::GPT> model = model_for(c);
  const nn::GPT& gpt = *model;
  NoGradGuard no_grad;
  const int64_t block = c.config.block_size, V = c.config.vocab_size;
  std::vector<int32_t> ids(block);
  for (int64_t t = 0; t < block; ++t) ids[t] = int32_t((7 * t + 3) % V);
  infer::Decoder decoder(gpt, 1, c.weights);
  for (int64_t start : {int64_t(1), block / 2, block}) {  // restart with `start` tokens, then step to the end
    const std::span<const int32_t> all(ids);
    EXPECT_LE(max_diff(decoder.restart(all.first(start)), forward_last(gpt, all.first(start))), c.tol);
    for (int64_t t = start; t < block; ++t) {
      const auto got = decoder.step(ids[t]);
      EXPECT_LE(max_diff(got, forward_last(gpt, all.first(t + 1))), c.tol) << "position " << t << " after " << start;
    }
    EXPECT_EQ(decoder.length(), block);
  }
}

// step_batch (one product per weight matrix for several streams) against step on a
// decoder per stream: streams at different positions, in any order, some sitting out
// a step (as requests join and leave a server's batch).
class BatchMatchesStep : public DecoderMatchesForward {};  // the same cases, the same skip

TEST_P(BatchMatchesStep, RowByRowAsStreamsJoinAndLeave) {
  const DecoderCase& c = GetParam();
  const std::unique_ptr<nn::GPT> model = model_for(c);
  const nn::GPT& gpt = *model;
  NoGradGuard no_grad;
  const int64_t block = c.config.block_size, V = c.config.vocab_size, S = 3;
  infer::Decoder batched(gpt, S, c.weights);
  std::vector<std::unique_ptr<infer::Decoder>> alone;
  std::vector<int32_t> next(S);
  for (int64_t s = 0; s < S; ++s) {
    std::vector<int32_t> prompt(size_t(s + 1));
    for (size_t t = 0; t < prompt.size(); ++t) prompt[t] = int32_t((5 * t + 3 * s + 1) % V);
    alone.push_back(std::make_unique<infer::Decoder>(gpt, 1, c.weights));
    EXPECT_LE(max_diff(batched.restart(prompt, s), alone.back()->restart(prompt)), 1e-6f);
    next[size_t(s)] = int32_t((s + 2) % V);
  }
  for (int64_t step = 0; step + S < block; ++step) {
    std::vector<int64_t> streams = {2, 0, 1};
    if (step % 2) streams = {2, 0};  // stream 1 sits this one out
    std::vector<int32_t> ids;
    for (int64_t s : streams) ids.push_back(next[size_t(s)]);
    const auto got = batched.step_batch(streams, ids);
    ASSERT_EQ(got.size(), streams.size() * size_t(V));
    for (size_t b = 0; b < streams.size(); ++b) {
      const int64_t s = streams[b];
      const auto want = alone[size_t(s)]->step(ids[b]);
      // bf16 and int8 weights: a row's product is the same kernel's, batched or not.
      const float tol = c.weights == nn::Weights::f32 ? c.tol : 1e-6f;
      EXPECT_LE(max_diff(got.subspan(b * V, V), want), tol) << "stream " << s << " at step " << step;
      EXPECT_EQ(batched.length(s), alone[size_t(s)]->length());
      next[size_t(s)] = int32_t((7 * step + 3 * s + 1) % V);
    }
  }
  expect_error([&] { batched.step_batch(std::vector<int64_t>{0, 0}, std::vector<int32_t>{1, 1}); },
               {"stream 0 twice"});
  expect_error([&] { batched.step_batch(std::vector<int64_t>{3}, std::vector<int32_t>{1}); }, {"stream 3 outside"});
}

const nn::GPTConfig kSmall{.vocab_size = 13, .block_size = 10, .n_layer = 2, .n_head = 2, .n_embd = 16};
nn::GPTConfig with(nn::GPTConfig c, auto edit) {
  edit(c);
  return c;
}
// llama's shape: rotary positions, RMSNorm, SwiGLU and no biases.
void llama(nn::GPTConfig& c) {
  c.pos = nn::Positions::rope;
  c.norm = nn::Norm::rms;
  c.activation = nn::Activation::swiglu;
  c.bias = false;
}

const auto kCases = ::testing::Values(DecoderCase{"relu", kSmall, Precision::fp32, 2e-5f},
                      DecoderCase{"gelu_no_bias", with(kSmall, [](auto& c) {
                                    c.activation = nn::Activation::gelu;
                                    c.bias = false;
                                  }), Precision::fp32, 2e-5f},
                      DecoderCase{"four_heads", with(kSmall, [](auto& c) { c.n_head = 4; }), Precision::fp32, 2e-5f},
                      DecoderCase{"rope_qknorm", with(kSmall, [](auto& c) {
                                    c.pos = nn::Positions::rope;
                                    c.qk_norm = true;
                                  }), Precision::fp32, 2e-5f},
                      DecoderCase{"relu2_softcap_tied", with(kSmall, [](auto& c) {
                                    c.activation = nn::Activation::relu2;
                                    c.logit_softcap = 3.0f;
                                    c.tie_weights = true;
                                  }), Precision::fp32, 2e-5f},
                      DecoderCase{"gelu_tanh", with(kSmall, [](auto& c) { c.activation = nn::Activation::gelu_tanh; }),
                                  Precision::fp32, 2e-5f},
                      DecoderCase{"bigram", with(kSmall, [](auto& c) { c.bigram = true; }), Precision::fp32, 2e-5f},
                      DecoderCase{"bigram_rope", with(kSmall, [](auto& c) {
                                    c.bigram = true;
                                    c.pos = nn::Positions::rope;
                                  }), Precision::fp32, 2e-5f},
                      DecoderCase{"x0_shortcut_rope", with(kSmall, [](auto& c) {
                                    c.x0_shortcut = true;
                                    c.pos = nn::Positions::rope;
                                  }), Precision::fp32, 2e-5f},
                      DecoderCase{"unet_skips_five_blocks", with(kSmall, [](auto& c) {
                                    c.unet_skips = true;
                                    c.n_layer = 5;
                                    c.x0_shortcut = true;
                                  }), Precision::fp32, 2e-5f},
                      DecoderCase{"value_embed_bigram_rope", with(kSmall, [](auto& c) {
                                    c.value_embed = true;
                                    c.bigram = true;
                                    c.pos = nn::Positions::rope;
                                  }), Precision::fp32, 2e-5f},
                      DecoderCase{"llama_rms_swiglu", with(kSmall, llama), Precision::fp32, 2e-5f},
                      DecoderCase{"rms_swiglu_bias_learned", with(kSmall, [](auto& c) {
                                    c.norm = nn::Norm::rms;
                                    c.activation = nn::Activation::swiglu;
                                  }), Precision::fp32, 2e-5f},
                      // --ffn-hidden: a width that is neither default (SwiGLU's 64, 4C 64 at C 16).
                      DecoderCase{"llama_ffn_hidden_40", with(kSmall, [](auto& c) {
                                    llama(c);
                                    c.ffn_hidden = 40.0f;
                                  }), Precision::fp32, 2e-5f},
                      DecoderCase{"gelu_ffn_hidden_40", with(kSmall, [](auto& c) {
                                    c.activation = nn::Activation::gelu;
                                    c.ffn_hidden = 40.0f;
                                  }), Precision::fp32, 2e-5f},
                      // bf16 products: the decoder rounds the same operands, but its attention
                      // scores and weighted values are fp32 sums (forward's are bf16 products).
                      DecoderCase{"bf16", kSmall, Precision::bf16, 2e-2f},
                      // Weights stored small, against forward's fp32 logits (about 1 in size
                      // here): bf16 keeps 8 bits of each weight, int8 about 7 of its block's
                      // largest, and int8's steps round the activations to 7 bits of their
                      // block's largest too (the integer product). Measured: at most 2.6e-4
                      // (bf16) and 4.8e-3 (int8; 1.2e-3 before its steps quantized the
                      // activations). kSmall's products have K = 16 and 64 (a part of a block);
                      // tiled's K = 192 and 768 make a prompt's products run in tiles of
                      // 341 and 85 weight rows, the last of each matrix a part.
                      DecoderCase{"weights_bf16", kSmall, Precision::fp32, 1e-3f, nn::Weights::bf16},
                      DecoderCase{"weights_int8", kSmall, Precision::fp32, 1e-2f, nn::Weights::int8},
                      DecoderCase{"weights_int8_rope_value_embed_tied", with(kSmall, [](auto& c) {
                                    c.pos = nn::Positions::rope;
                                    c.value_embed = true;
                                    c.tie_weights = true;
                                    c.n_embd = 48;
                                  }), Precision::fp32, 1e-2f, nn::Weights::int8},
                      DecoderCase{"weights_int8_tiled", with(kSmall, [](auto& c) {
                                    c.n_embd = 192;
                                    c.n_head = 4;
                                    c.n_layer = 1;
                                  }), Precision::fp32, 1e-2f, nn::Weights::int8});
auto case_name = [](const auto& info) { return std::string(info.param.name); };
INSTANTIATE_TEST_SUITE_P(Configs, DecoderMatchesForward, kCases, case_name);
INSTANTIATE_TEST_SUITE_P(Configs, BatchMatchesStep, kCases, case_name);

// With rotary positions the cache rolls past block_size. In one layer nothing else
// carries position, so every step must equal forward over the last block_size tokens.
TEST(Decoder, RotaryCacheRollsAsARecomputeOfTheLastBlockInOneLayer) {
  nn::GPTConfig config = with(kSmall, [](auto& c) {
    c.n_layer = 1;
    c.pos = nn::Positions::rope;
  });
  nn::GPT gpt(config);
  gpt.eval();
  NoGradGuard no_grad;
  const int64_t block = config.block_size;
  std::vector<int32_t> ids(4 * block);
  for (size_t t = 0; t < ids.size(); ++t) ids[t] = int32_t((5 * t + 2) % config.vocab_size);
  infer::Decoder decoder(gpt);
  ASSERT_TRUE(decoder.rolls());
  const std::span<const int32_t> all(ids);
  decoder.restart(all.first(3));
  for (size_t t = 3; t < ids.size(); ++t) {
    const auto got = decoder.step(ids[t]);
    const size_t first = t + 1 > size_t(block) ? t + 1 - block : 0;
    EXPECT_LE(max_diff(got, forward_last(gpt, all.subspan(first, t + 1 - first))), 2e-5f) << "position " << t;
  }
  // Deeper layers keep what their tokens saw earlier (sliding-window attention), so a
  // two-layer model differs from the recompute once the window has moved.
  nn::GPT deep(with(config, [](auto& c) { c.n_layer = 2; }));
  deep.eval();
  infer::Decoder rolling(deep);
  rolling.restart(all.first(1));
  std::span<const float> last;
  for (size_t t = 1; t < ids.size(); ++t) last = rolling.step(ids[t]);
  EXPECT_EQ(rolling.length(), int64_t(ids.size()));
  EXPECT_GT(max_diff(last, forward_last(deep, all.last(block))), 1e-4f);
}

// The bytes a step reads: a quarter of f32's and 2 bytes in 32 for the scales (int8),
// half (bf16).
TEST(Decoder, StoresEachWeightFormatInItsBytes) {
  nn::GPT gpt(with(kSmall, [](auto& c) { c.n_embd = 64; }));
  gpt.eval();
  const int64_t f32 = infer::Decoder(gpt).matrix_bytes();
  EXPECT_EQ(f32 % 4, 0);
  EXPECT_EQ(infer::Decoder(gpt, 1, nn::Weights::bf16).matrix_bytes(), f32 / 2);
  EXPECT_EQ(infer::Decoder(gpt, 1, nn::Weights::int8).matrix_bytes(), f32 / 4 / 32 * 34);
  gpt.set_precision(Precision::bf16);
  expect_error([&] { infer::Decoder(gpt, 1, nn::Weights::int8); }, {"weights int8", "fp32 products", "bf16"});
}

// folio serve --no-batching's slots: decoders on one stored copy of the matrices run
// as a decoder of its own does, each with its own cache, and hold no copy of their own.
TEST(Decoder, DecodersSharingTheirMatricesRunAsOnesOfTheirOwn) {
  nn::GPT gpt(with(kSmall, [](auto& c) { c.n_embd = 64; }));
  gpt.eval();
  NoGradGuard no_grad;
  for (nn::Weights w : {nn::Weights::f32, nn::Weights::int8}) {
    const auto matrices = infer::Decoder::store(gpt, w);
    infer::Decoder own(gpt, 1, w), first(gpt, 1, matrices), second(gpt, 1, matrices);
    EXPECT_EQ(matrices.use_count(), 3);  // the store and the two decoders: nothing copied
    EXPECT_EQ(first.weights(), w);
    EXPECT_EQ(first.matrix_bytes(), own.matrix_bytes());
    const std::vector<int32_t> a = {1, 2, 3}, b = {7};
    EXPECT_EQ(max_diff(first.restart(a), own.restart(a)), 0.0f);
    second.restart(b);  // another cache: the first decoder's stays as it was
    for (int32_t id : {4, 5, 6}) {
      EXPECT_EQ(max_diff(first.step(id), own.step(id)), 0.0f) << nn::to_string(w) << " token " << id;
      second.step(id);
    }
  }
}

// Decoder::set_threads: a step's large products (here fc and fc2, 768 x 192 weights:
// qkv's 576 x 192 stays whole) split their rows across two threads, each output
// computed as one thread computes it, so the logits are the same to the bit, for one
// stream (step) and several (step_batch), in every weight format.
TEST(Decoder, TwoThreadsStepAsOne) {
  nn::GPT gpt(with(kSmall, [](auto& c) {
    c.n_embd = 192;
    c.n_head = 4;
    c.n_layer = 1;
  }));
  set_biases(gpt);
  gpt.eval();
  NoGradGuard no_grad;
  for (nn::Weights w : nn::kAllWeights) {
    infer::Decoder one(gpt, 2, w), two(gpt, 2, w);
    two.set_threads(2);
    EXPECT_EQ(two.threads(), 2);
    const std::vector<int32_t> a = {1, 2, 3}, b = {7};
    EXPECT_EQ(max_diff(one.restart(a, 0), two.restart(a, 0)), 0.0f);
    EXPECT_EQ(max_diff(one.restart(b, 1), two.restart(b, 1)), 0.0f);
    for (int32_t id : {4, 5}) EXPECT_EQ(max_diff(one.step(id), two.step(id)), 0.0f) << nn::to_string(w);
    const std::vector<int64_t> streams = {1, 0};
    const std::vector<int32_t> ids = {8, 9};
    EXPECT_EQ(max_diff(one.step_batch(streams, ids), two.step_batch(streams, ids)), 0.0f) << nn::to_string(w);
  }
  infer::Decoder decoder(gpt);
  expect_error([&] { decoder.set_threads(0); }, {"threads must be at least 1", "0"});
}

// At a long context a step's attention splits its heads across the decoder's threads
// (Decoder::kSplitCacheFloats), each head computed as on one thread with its thread's
// scratch: the logits are one thread's to the bit, for a step (its heads split), a
// batch of streams (a row's heads split between the threads) and a restart's every
// position (one stream's rows: the heads split, each head's rows in order), with
// learned positions and with rotary ones whose cache rolls.
TEST(Decoder, TwoThreadsAttendAsOneAtALongContext) {
  const nn::GPTConfig learned{.vocab_size = 13, .block_size = 352, .n_layer = 1, .n_head = 4, .n_embd = 192};
  const int64_t block = learned.block_size, P = block - 6;  // P: each stream's prompt
  ASSERT_GE((P + 1) * 2 * learned.n_embd, infer::Decoder::kSplitCacheFloats);  // each step splits
  const nn::GPTConfig rotary = with(learned, [](auto& c) {
    c.pos = nn::Positions::rope;
    c.qk_norm = true;
  });
  for (const nn::GPTConfig& config : {learned, rotary}) {
    nn::GPT gpt(config);
    set_biases(gpt);
    gpt.eval();
    NoGradGuard no_grad;
    const bool rolls = config.pos == nn::Positions::rope;
    infer::Decoder one(gpt, 3), two(gpt, 3);
    two.set_threads(2);
    std::vector<int32_t> ids(static_cast<size_t>(block));
    for (size_t t = 0; t < ids.size(); ++t) ids[t] = int32_t((7 * t + 3) % 13);
    const std::span<const int32_t> all(ids);
    // every position of 48: one stream's rows, a step's kernels (not a prompt's)
    EXPECT_EQ(max_diff(one.restart(all.first(48), 0, true), two.restart(all.first(48), 0, true)), 0.0f);
    for (int64_t s = 0; s < 3; ++s)
      EXPECT_EQ(max_diff(one.restart(all.first(P), s), two.restart(all.first(P), s)), 0.0f) << "stream " << s;
    for (int64_t n = 0; n < (rolls ? 8 : 2); ++n)  // rotary: past block_size, the cache rolled
      EXPECT_EQ(max_diff(one.step(ids[size_t(n)]), two.step(ids[size_t(n)])), 0.0f)
          << "step " << n << ", rope " << rolls;
    const std::vector<int64_t> streams = {2, 0, 1};  // 12 (row, head) units: the second row's heads split
    const std::vector<int32_t> next = {8, 9, 10};
    for (int n = 0; n < 2; ++n)
      EXPECT_EQ(max_diff(one.step_batch(streams, next), two.step_batch(streams, next)), 0.0f) << "rope " << rolls;
  }
}

// A prompt of kPromptProductRows rows or more runs as the forward does
// (oneDNN's products, int8 and bf16 on widened tiles; attention through two matrix
// products a head, infer/decoder_attention.cpp), a shorter one through a step's kernels
// (which DecoderMatchesForward's prompts of at most 10 rows cover): its logits, and
// those of the steps after it (which read the keys and values it cached), are the
// forward's, in every weight format.
TEST(Decoder, LongPromptAttendsThroughProductsAsTheForward) {
  const nn::GPTConfig base{.vocab_size = 13, .block_size = 56, .n_layer = 2, .n_head = 4, .n_embd = 32};
  const nn::GPTConfig configs[] = {base, with(base, [](auto& c) {
                                     c.pos = nn::Positions::rope;
                                     c.qk_norm = true;
                                     c.value_embed = true;
                                   }),
                                   with(base, llama),
                                   // GPT-2's GELU; fc (3072, 768) is many tiles of widened weights
                                   with(base, [](auto& c) {
                                     c.n_layer = 1;
                                     c.n_embd = 768;
                                     c.activation = nn::Activation::gelu_tanh;
                                   }),
                                   with(base, [](auto& c) { c.activation = nn::Activation::gelu; })};
  for (const nn::GPTConfig& config : configs)
    for (const nn::Weights w : nn::kAllWeights) {
      const std::unique_ptr<nn::GPT> model = model_for({"long", config, Precision::fp32, 0.0f});
      NoGradGuard no_grad;
      // as DecoderMatchesForward's cases (the weights' rounding, and int8's
      // activations'), growing with the width's square root: sums of C rounded terms
      const float wide = std::sqrt(float(config.n_embd) / 32.0f);
      const float tol = w == nn::Weights::f32 ? 2e-5f : w == nn::Weights::bf16 ? 1e-3f * wide : 1e-2f * wide;
      std::vector<int32_t> ids(size_t(config.block_size));
      for (size_t t = 0; t < ids.size(); ++t) ids[t] = int32_t((7 * t + 3) % 13);
      const std::span<const int32_t> all(ids);
      const int64_t T = infer::kPromptProductRows + 8;
      infer::Decoder decoder(*model, 2, w);
      decoder.restart(all.first(3), 0);  // another stream's cache, which the prompt must leave alone
      EXPECT_LE(max_diff(decoder.restart(all.first(T), 1), forward_last(*model, all.first(T))), tol)
          << nn::to_string(w);
      for (int64_t t = T; t < config.block_size; ++t)
        EXPECT_LE(max_diff(decoder.step(ids[t], 1), forward_last(*model, all.first(t + 1))), tol)
            << "position " << t << ", rope " << (config.pos == nn::Positions::rope) << ", " << nn::to_string(w);
      EXPECT_LE(max_diff(decoder.step(ids[3], 0), forward_last(*model, all.first(4))), tol) << "the other stream";
    }
}

TEST(Decoder, RefusesPastTheContextAndOutsideTheVocabulary) {
  nn::GPT gpt(kSmall);
  gpt.eval();
  infer::Decoder decoder(gpt);
  const std::vector<int32_t> full(kSmall.block_size, 1);
  decoder.restart(full);
  expect_error([&] { decoder.step(1); }, {"block_size 10", "restart"});
  decoder.restart(std::vector<int32_t>{1});
  expect_error([&] { decoder.step(13); }, {"token id 13", "vocabulary of 13"});
  expect_error([&] { decoder.restart({}); }, {"restart with 0 tokens"});
}

}  // namespace
}  // namespace folio
