// The multiple-choice rule (infer/task_eval.h) on cases small enough to work out by
// hand: the tokens each choice is scored on (the prompt-start id, the context's
// trailing space, the cut to the window), the picks (characters, not bytes; ties to
// the first), the standard error, and the batched, padded forward pass against one
// row at a time. The whole is held against numpy in test_task_eval.sh.
#include <gtest/gtest.h>

#include <cmath>

#include "infer/task_eval.h"
#include "io/task_file.h"
#include "bytes_tokenizer.h"
#include "support.h"

namespace folio {
namespace {

using testing::BytesWithStart;

std::vector<int32_t> ids(std::string_view s) { return BytesWithStart().encode(s); }

TEST(TaskEval, ChoiceTokensPutTheStartFirstAndMoveTrailingSpacesToTheChoice) {
  const ChoiceTokens t = choice_tokens(BytesWithStart(), "Answer: ", "yes", 64);
  std::vector<int32_t> context = {200};
  for (int32_t c : ids("Answer:")) context.push_back(c);
  EXPECT_EQ(t.context, context);
  EXPECT_EQ(t.continuation, ids("  yes"));  // the context's space, then the choice's own
  EXPECT_FALSE(t.cut);
}

TEST(TaskEval, ChoiceTokensCutTheContextFromTheLeftToFitTheWindow) {
  // start + "abcdef" (7) and " gh" (3): the model reads 7 + 3 - 1 = 9 > 8 tokens, so the
  // context keeps 8 + 1 - 3 = 6 of its 7.
  const ChoiceTokens t = choice_tokens(BytesWithStart(), "abcdef", "gh", 8);
  EXPECT_EQ(t.context, ids("abcdef"));
  EXPECT_EQ(t.continuation, ids(" gh"));
  EXPECT_TRUE(t.cut);
  EXPECT_FALSE(choice_tokens(BytesWithStart(), "abcde", "gh", 8).cut);  // 6 + 3 - 1 = 8 fits
  // The continuation alone fills the window: one token of context is still read.
  EXPECT_EQ(choice_tokens(BytesWithStart(), "abc", "efghijk", 8).context, ids("c"));
  testing::expect_error([] { choice_tokens(BytesWithStart(), "abc", "efghijkl", 8); },
                        {"the choice is 9 tokens, more than the model's window of 8"});
}

TEST(TaskEval, PicksNormaliseByCharactersAndTiesGoToTheFirst) {
  // "é" is 1 character and 2 bytes: by characters -1.5 < -1 ("ab": -2 / 2), by bytes
  // -0.75 would win.
  const std::vector<std::string> choices = {"ab", "\xC3\xA9"};
  const std::vector<double> logprobs = {-2.0, -1.5};
  const ChoicePick p = pick_choice(logprobs, choices);
  EXPECT_EQ(p.pred, 1);
  EXPECT_EQ(p.pred_norm, 0);
  const std::vector<std::string> same = {"ab", "cd", "ef"};
  const std::vector<double> tied = {-3.0, -1.0, -1.0};
  EXPECT_EQ(pick_choice(tied, same).pred, 1);
  EXPECT_EQ(pick_choice(tied, same).pred_norm, 1);
  EXPECT_EQ(characters("a\xC3\xA9\xE6\x97\xA5"), 3);
}

TEST(TaskEval, StandardErrorIsTheSampleStdOverRootN) {
  const std::vector<int> scores = {1, 0, 1, 1};
  const Metric m = mean_with_stderr(scores);
  EXPECT_DOUBLE_EQ(m.mean, 0.75);
  // sample std: sqrt((3 * 0.25^2 + 0.75^2) / 3) = 0.5; over sqrt(4)
  ASSERT_TRUE(m.standard_error.has_value());
  EXPECT_DOUBLE_EQ(*m.standard_error, 0.25);
  const std::vector<int> one = {1};
  EXPECT_FALSE(mean_with_stderr(one).standard_error.has_value());
}

// The rows of a batch are padded to the longest; each row's sum is the one it has alone.
TEST(TaskEval, BatchedRowsScoreAsEachAlone) {
  const nn::GPT model(nn::GPTConfig{.vocab_size = 256, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 16});
  const_cast<nn::GPT&>(model).eval();
  const BytesWithStart t;
  const std::vector<ChoiceTokens> rows = {choice_tokens(t, "To be", "or not", 16), choice_tokens(t, "a", "b", 16),
                                          choice_tokens(t, "the whole context here", "is cut", 16)};
  const std::vector<double> together = continuation_logprobs(model, rows);
  ASSERT_EQ(together.size(), 3u);
  for (size_t r = 0; r < rows.size(); ++r) {
    const double alone = continuation_logprobs(model, std::span(&rows[r], 1))[0];
    EXPECT_NEAR(together[r], alone, 1e-4) << r;
    EXPECT_LT(alone, 0.0);
  }
  // The sum is over the continuation's tokens: log(1/256) each for a model that knows
  // nothing would be -5.5 a token; here it is near that.
  EXPECT_NEAR(together[0] / 7.0, std::log(1.0 / 256.0), 1.0);
}

// Every prefix of a good line of each layout, and every one-byte change of it to a byte
// JSON gives meaning to (or an invalid one), reads as an item or is a folio::Error:
// nothing else escapes (no std::out_of_range, no crash).
TEST(TaskEval, DamagedLinesAreAnItemOrAFolioError) {
  const std::vector<std::string> good = {
      R"({"ctx": "a b", "endings": ["c", "d"], "label": "1"})",
      R"({"context": "a", "choices": ["b", "c", "d"], "answer": 2})",
      R"({"question": {"stem": "a", "choices": [{"text": "b", "label": "A"}, {"text": "c", "label": "B"}]}, )"
      R"("answerKey": "B"})"};
  int items = 0, errors = 0;
  const auto read = [&](const std::string& line) {
    std::string format;
    try {
      parse_choice_item(line, "t.jsonl", 1, format);
      ++items;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("t.jsonl:1: ", 0), 0u) << e.what();
      ++errors;
    }
  };
  for (const std::string& line : good) {
    for (size_t n = 0; n <= line.size(); ++n) read(line.substr(0, n));
    for (size_t i = 0; i < line.size(); ++i)
      for (char c : std::string("\"{}[],:0-9 \xff") + '\0') {
        std::string damaged = line;
        damaged[i] = c;
        read(damaged);
      }
  }
  EXPECT_GE(items, 3 + 10);  // the good lines, and changes such as another digit in a string
  EXPECT_GT(errors, 1000);
}

}  // namespace
}  // namespace folio
