// infer::Generator, all of inference behind one class: streams side by side give
// each stream's own tokens, the context window drops and recomputes as it says,
// stop strings cut the text, and sampling's filters keep what they promise.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "infer/generator.h"
#include "support.h"

namespace folio {
namespace {

using testing::expect_error;

nn::GPT eval_model(nn::GPTConfig c) {
  nn::GPT gpt(c);
  gpt.eval();
  return gpt;
}

const nn::GPTConfig kTiny{.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16};

// Three sequences on one generator, each step taken together (one batched step, with
// a prefill for each stream whose window moved): the tokens each would get alone.
TEST(Generator, StreamsSideBySideGetTheTokensEachGetsAlone) {
  for (const nn::Positions pos : {nn::Positions::learned, nn::Positions::rope}) {
    nn::GPTConfig c = kTiny;
    c.pos = pos;
    const nn::GPT gpt = eval_model(c);
    const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {4}, {5, 6, 7, 8, 9, 10, 1, 2, 3, 4}};
    const std::vector<int64_t> shifts = {0, 1, 3};  // learned positions: recompute at different moments
    constexpr int64_t kTokens = 30;                 // past block_size for every stream
    std::vector<std::vector<int32_t>> alone(3), together(3);
    for (size_t s = 0; s < 3; ++s) {
      Rng rng(100 + s);
      const SampleOptions opt{.max_new_tokens = kTokens, .context_shift = shifts[s]};
      generate(gpt, prompts[s], opt, rng, [&](int32_t id) { alone[s].push_back(id); });
    }
    infer::Generator generator(gpt, 3);
    std::vector<Rng> rngs = {Rng(100), Rng(101), Rng(102)};
    for (int64_t s = 0; s < 3; ++s)
      generator.start(s, prompts[s], {.max_new_tokens = kTokens, .context_shift = shifts[s]}, rngs[s]);
    const std::vector<int64_t> streams = {2, 0, 1};  // any order
    for (int64_t n = 0; n < kTokens; ++n) {
      const std::span<const float> rows = generator.logits(streams);  // (3, V)
      for (size_t b = 0; b < streams.size(); ++b)
        together[streams[b]].push_back(
            generator.sample(streams[b], rows.subspan(b * c.vocab_size, c.vocab_size)).id);
    }
    EXPECT_EQ(together, alone) << (pos == nn::Positions::rope ? "rope" : "learned");
  }
}

// Learned positions: once the window is full, context_shift tokens are dropped and the
// rest recomputed; 1 recomputes for every token, block_size / 2 (0) every half block.
TEST(Generator, TheWindowShiftsAsContextShiftSays) {
  const nn::GPT gpt = eval_model(kTiny);
  for (const int64_t shift : {int64_t(1), int64_t(0)}) {
    infer::Generator generator(gpt);
    Rng rng(7);
    generator.start(0, std::vector<int32_t>{1, 2, 3}, {.context_shift = shift}, rng);
    int64_t prefills = 0;
    for (int64_t n = 0; n < 21; ++n) {
      prefills += generator.needs_prefill(0);
      generator.next();
    }
    // The prompt's prefill; the window (3 tokens + those drawn) overflows block_size 8
    // at the 6th token, so the 7th recomputes. Then each token overflows it again (1),
    // or every 4th does (0: block_size / 2 = 4): prefills for tokens 7..21, or 7, 11, 15, 19.
    EXPECT_EQ(prefills, shift == 1 ? 1 + 15 : 1 + 4) << "context_shift " << shift;
  }
  nn::GPTConfig c = kTiny;
  c.pos = nn::Positions::rope;  // the cache rolls: the prompt's prefill only
  const nn::GPT rope = eval_model(c);
  infer::Generator rolling(rope);
  Rng rng(7);
  rolling.start(0, std::vector<int32_t>{1, 2, 3}, {.context_shift = 1}, rng);
  int64_t prefills = 0;
  for (int64_t n = 0; n < 21; ++n) prefills += rolling.needs_prefill(0), rolling.next();
  EXPECT_EQ(prefills, 1);
}

// The id tokenizer spells id 7 "<|7|>": a stop string ends the text before it, text
// that may start one is held back, and finish() gives back what was held.
TEST(Generator, StopStringsCutTheTextBeforeThem) {
  const nn::GPT gpt = eval_model(kTiny);
  const auto tokenizer = make_id_tokenizer(kTiny.vocab_size);
  const std::vector<int32_t> prompt{1, 2};
  const SampleOptions greedy{.greedy = true};
  Rng rng(1);
  infer::Generator generator(gpt);
  generator.start(0, prompt, greedy, rng, tokenizer.get());
  std::vector<int32_t> ids;
  std::string text;
  for (int n = 0; n < 6; ++n) {
    const infer::Generator::Token t = generator.next();
    ids.push_back(t.id);
    text += t.text;
  }
  text += generator.finish().text;
  std::string spelled;
  for (int32_t id : ids) spelled += "<|" + std::to_string(id) + "|>";
  ASSERT_EQ(text, spelled);
  const std::string stop = "<|" + std::to_string(ids[3]) + "|>";  // the fourth token's text
  const std::string before = spelled.substr(0, spelled.find(stop));
  generator.start(0, prompt, greedy, rng, tokenizer.get(), {stop, "never"});
  std::string cut;
  bool stopped = false;
  for (int n = 0; n < 6 && !stopped; ++n) {
    const infer::Generator::Token t = generator.next();
    cut += t.text, stopped = t.stopped;
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(cut, before);
  // All the text may be the start of this stop string: held back, then given at the end.
  generator.start(0, prompt, greedy, rng, tokenizer.get(), {spelled + "!"});
  std::string held;
  for (int n = 0; n < 6; ++n) held += generator.next().text;
  EXPECT_EQ(held, "");
  const infer::Generator::Token end = generator.finish();
  EXPECT_FALSE(end.stopped);
  EXPECT_EQ(end.text, spelled);
}

TEST(Generator, RefusesStreamsItDoesNotHave) {
  const nn::GPT gpt = eval_model(kTiny);
  infer::Generator generator(gpt, 2);
  Rng rng(1);
  const std::vector<int32_t> prompt{1};
  expect_error([&] { generator.start(2, prompt, {}, rng); }, {"stream 2 outside [0, 2)"});
  expect_error([&] { generator.next(1); }, {"stream 1 was not started"});
  expect_error([&] { generator.start(0, std::vector<int32_t>{}, {}, rng); }, {"the prompt is empty"});
  expect_error([&] { generator.start(0, std::vector<int32_t>{11}, {}, rng); }, {"token id 11", "vocabulary of 11"});
  generator.start(0, prompt, {}, rng);
  generator.start(1, prompt, {}, rng);
  expect_error([&] { generator.logits(std::vector<int64_t>{1, 1}); }, {"stream 1 twice"});
}

TEST(Generate, KVCacheGivesTheSameTokens) {
  nn::GPT gpt({.vocab_size = 11, .block_size = 12, .n_layer = 2, .n_head = 2, .n_embd = 16});
  const std::vector<int32_t> prompt{1, 2, 3};
  auto run = [&](bool cache) {
    SampleOptions o;
    o.max_new_tokens = 40;  // past block_size: the window slides and is recomputed
    o.kv_cache = cache;
    Rng rng(99);
    std::vector<int32_t> out;
    generate(gpt, prompt, o, rng, [&](int32_t id) { out.push_back(id); });
    return out;
  };
  const auto cached = run(true), plain = run(false);
  EXPECT_EQ(cached.size(), 40u);
  EXPECT_EQ(cached, plain);
}

TEST(Generate, RefusesToSampleWithDropoutOn) {
  nn::GPT gpt({.vocab_size = 5, .block_size = 4, .n_layer = 1, .n_head = 1, .n_embd = 8, .dropout = 0.2f});
  const std::vector<int32_t> prompt{1};
  Rng rng(1);
  auto sample = [&] { generate(gpt, prompt, SampleOptions{.max_new_tokens = 3}, rng, [](int32_t) {}); };
  EXPECT_THROW(sample(), Error);  // a fresh module is in training mode
  gpt.eval();
  EXPECT_NO_THROW(sample());
}

TEST(Generate, SamplingFilters) {
  const std::vector<float> logits{0.1f, 3.0f, 2.9f, -1.0f};
  std::vector<std::pair<float, int32_t>> scratch;
  Rng rng(1);
  SampleOptions greedy;
  greedy.top_k = 1;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_token(logits, greedy, rng, scratch), 1);
  SampleOptions nucleus;
  nucleus.top_p = 0.6f;  // token 1 alone holds 50.6%: tokens 1 and 2 make the nucleus
  std::set<int32_t> seen;
  for (int i = 0; i < 200; ++i) seen.insert(sample_token(logits, nucleus, rng, scratch));
  EXPECT_EQ(seen, (std::set<int32_t>{1, 2}));
  nucleus.top_p = 0.5f;  // ...and 50.6% alone reaches 0.5
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_token(logits, nucleus, rng, scratch), 1);
  SampleOptions cold;
  cold.temperature = 0.01f;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_token(logits, cold, rng, scratch), 1);
  // So cold that 3.0 / T overflows float: the most likely token still, not the least.
  cold.temperature = 1e-40f;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_token(logits, cold, rng, scratch), 1);
  const std::vector<float> diverged{0.1f, std::nanf(""), 1.0f};
  EXPECT_THROW(sample_token(diverged, greedy, rng, scratch), Error);
  SampleOptions bad;
  bad.top_p = 0.0f;
  EXPECT_THROW(bad.validate(), Error);
}

}  // namespace
}  // namespace folio
