// Text typed on the command line, read alike by every command that takes it (escapes,
// a prompt longer than the model's context, temperature 0), and the words and numbers
// the commands print about it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "tests/support.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using testing::expect_contains;
using testing::Result;

class CliText : public ::testing::Test {
 protected:
  // One small char model for the whole suite: every test only reads it.
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir("cli_text");
    testing::write_small_corpus(dir_->path / "corpus.txt", 20000);
    const Result t = run("train --data " + (*dir_ / "corpus.txt") + " --out " + run_dir() +
                         " --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --max-iters 5"
                         " --eval-interval 5 --eval-iters 2 --threads 1");
    ASSERT_EQ(t.code, 0) << t.err;
    train_out_ = new std::string(t.out);
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete train_out_;
  }
  static Result run(const std::string& args) { return testing::run_folio(testing::words(args), dir_->path); }
  static std::string run_dir() { return *dir_ / "run"; }
  static std::string model() { return " --checkpoint " + run_dir(); }
  static inline testing::TempDir* dir_ = nullptr;
  static inline std::string* train_out_ = nullptr;
};

TEST_F(CliText, EveryTextOptionReadsTheSameEscapes) {
  // generate's --prompt always read \n as a newline; tokens and attention read the same.
  const Result ids = run("tokens" + model() + " --text 'a\\nb' --format ids");
  ASSERT_EQ(ids.code, 0) << ids.err;
  testing::spit(dir_->path / "ab.txt", "a\nb");
  const Result from_file = run("tokens" + model() + " --file " + (*dir_ / "ab.txt") + " --format ids");
  ASSERT_EQ(from_file.code, 0) << from_file.err;
  EXPECT_EQ(ids.out, from_file.out) << "--text 'a\\nb' is not the text a, newline, b";

  const Result table = run("attention" + model() + " --prompt 'a\\nb' --layer 0 --head 0");
  ASSERT_EQ(table.code, 0) << table.err;
  // Three tokens: a, a newline (shown as \n) and b; no backslash token of its own.
  expect_contains(table.out, {"\\n"});
  const Result three = run("attention" + model() + " --prompt abc --layer 0 --head 0");
  ASSERT_EQ(three.code, 0) << three.err;
  EXPECT_EQ(std::count(table.out.begin(), table.out.end(), '\n'), std::count(three.out.begin(), three.out.end(), '\n'))
      << table.out;
}

TEST_F(CliText, AttentionOnAPromptLongerThanTheContextShowsItsLastWindow) {
  const std::string prompt(40, 'e');  // block_size is 16
  const Result r = run("attention" + model() + " --prompt " + prompt + "xyz --layer 0 --head 0");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_contains(r.err, {"43 tokens", "context is 16", "last 16"});
  const Result last = run("attention" + model() + " --prompt " + std::string(13, 'e') + "xyz --layer 0 --head 0");
  ASSERT_EQ(last.code, 0) << last.err;
  EXPECT_EQ(r.out, last.out) << "not the prompt's last 16 tokens";
}

TEST_F(CliText, TemperatureZeroIsGreedy) {
  const Result greedy = run("generate" + model() + " --prompt Th --max-new-tokens 40 --greedy");
  ASSERT_EQ(greedy.code, 0) << greedy.err;
  const Result zero = run("generate" + model() + " --prompt Th --max-new-tokens 40 --temperature 0 --seed 7");
  ASSERT_EQ(zero.code, 0) << zero.err;
  EXPECT_EQ(zero.out, greedy.out);
  const Result negative = run("generate" + model() + " --temperature -1");
  EXPECT_EQ(negative.code, 2);
  expect_contains(negative.err, {"--temperature must be >= 0", "token"});
  EXPECT_EQ(negative.err.find("character"), std::string::npos) << negative.err;
}

// --decode-threads reaches the decoder and leaves the text as it was (this model's
// products are too small to split; tests/test_decoder.cpp's TwoThreadsStepAsOne splits
// larger ones).
TEST_F(CliText, DecodeThreadsLeaveTheText) {
  const Result one = run("generate" + model() + " --prompt Th --max-new-tokens 20 --seed 3 --weights int8");
  ASSERT_EQ(one.code, 0) << one.err;
  const Result two =
      run("generate" + model() + " --prompt Th --max-new-tokens 20 --seed 3 --weights int8 --decode-threads 2");
  ASSERT_EQ(two.code, 0) << two.err;
  EXPECT_EQ(two.out, one.out);
}

// --timings counts the tokens as llama.cpp does: the prompt's window (here cut to the
// model's 16 positions) at the first step, then one decode step per later token; the
// text is the same with or without it.
TEST_F(CliText, TimingsCountThePromptWindowAndTheLaterTokens) {
  const std::string prompt(20, 'e');
  const Result plain = run("generate" + model() + " --prompt " + prompt + " --max-new-tokens 6 --seed 3");
  ASSERT_EQ(plain.code, 0) << plain.err;
  const Result timed = run("generate" + model() + " --prompt " + prompt + " --max-new-tokens 6 --seed 3 --timings");
  ASSERT_EQ(timed.code, 0) << timed.err;
  EXPECT_EQ(timed.out, plain.out);
  expect_contains(timed.err, {"timings: prompt 16 tokens in ", " tokens/s); generated 5 more tokens in "});
  const Result one = run("generate" + model() + " --prompt Th --max-new-tokens 1 --timings");
  ASSERT_EQ(one.code, 0) << one.err;
  expect_contains(one.err, {"timings: prompt 2 tokens in "});
  EXPECT_EQ(one.err.find("generated"), std::string::npos) << one.err;
}

TEST_F(CliText, CountsAgreeWithTheirNouns) {
  // A char model on ASCII text: one byte a token, said in the singular.
  expect_contains(*train_out_, {", 1 byte a token"});
  EXPECT_EQ(train_out_->find("1 bytes a token"), std::string::npos) << *train_out_;
  // One character the vocabulary lacks: "is", not "are".
  const Result one = run("tokens" + model() + " --text 'ab\x01'");
  EXPECT_EQ(one.code, 2);
  expect_contains(one.err, {"(1 character of the text is not"});
}

TEST_F(CliText, SmallSplitsAreSizedInTheirOwnUnit) {
  // A 20 KB corpus: its val split is ~2 KB, which "0.0 MB" hid.
  const Result t = run("tokenize " + (*dir_ / "corpus.txt") + " --out " + (*dir_ / "tokens") + " --tokenizer char");
  ASSERT_EQ(t.code, 0) << t.err;
  expect_contains(t.out, {" KB of text"});
  EXPECT_EQ(t.out.find("0.0 MB"), std::string::npos) << t.out;
}

}  // namespace
}  // namespace folio
