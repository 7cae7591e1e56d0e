// Tokenizers (data/tokenizer.h): round trips byte for byte, checkpoint metadata, the
// streaming decoder, errors; for characters and for SentencePiece BPE and unigram.
#include <gtest/gtest.h>

#include <string>

#include "data/base64.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "tests/support.h"

namespace folio {
namespace {

using testing::expect_error;

// Text that a lossy tokenizer would change: CJK, emoji, a combining mark, tabs, CRLF,
// runs of spaces, trailing spaces, a lone CR, no newline at the end.
const std::string kAwkward =
    "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x8E\x89\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x94\xAC e\xCC\x81\t\ttab\r\n"
    "    indented   \r\ntrailing   \n\n\rlone CR   \xC3\xA9t\xC3\xA9 \xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 x";

std::string corpus_head(size_t bytes) { return read_file(default_corpus_path()).substr(0, bytes); }

// A source file of this repository: code, with its indentation and punctuation.
std::string source_file() { return read_file(std::string(FOLIO_SOURCE_DIR) + "/data/char_tokenizer.cpp"); }

// One BPE tokenizer for the tests that only use one: training takes a second or two.
const Tokenizer& bpe() {
  static const std::unique_ptr<Tokenizer> t = make_tokenizer({"bpe", 512}, corpus_head(200000));
  return *t;
}

void expect_round_trip(const Tokenizer& t, const std::string& text) {
  const std::vector<int32_t> ids = t.encode(text);
  EXPECT_EQ(t.decode(ids), text) << t.describe();
  std::string streamed;  // whole characters at a time, the same text
  TokenStream stream(t);
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.finish();
  EXPECT_EQ(streamed, text) << t.describe();
}

// SentencePiece's training says nothing while it runs: on_training hears its start, its
// seconds about every second, and its end, with the bytes it learns from; and the
// tokenizer is the one trained without listening.
TEST(Tokenizer, TrainingReportsItsSeconds) {
  struct Heard {
    double seconds;
    int64_t bytes;
    bool done;
  };
  std::vector<Heard> heard;
  TokenizerSpec spec{"bpe", 512};
  spec.on_training = [&](double seconds, int64_t bytes, bool done) { heard.push_back({seconds, bytes, done}); };
  const auto t = make_tokenizer(spec, corpus_head(200000));
  ASSERT_GE(heard.size(), 2u);
  EXPECT_EQ(heard.front().seconds, 0.0);
  EXPECT_FALSE(heard.front().done);
  EXPECT_TRUE(heard.back().done);
  EXPECT_GT(heard.back().seconds, 0.0);
  for (size_t i = 0; i < heard.size(); ++i) {
    EXPECT_EQ(heard[i].bytes, 200000);
    EXPECT_EQ(heard[i].done, i + 1 == heard.size());
    if (i > 0) {
      EXPECT_GE(heard[i].seconds, heard[i - 1].seconds);
    }
  }
  EXPECT_EQ(t->fingerprint(), bpe().fingerprint());
}

TEST(Tokenizer, CharRoundTripsAnyText) {
  const std::string corpus = read_file(default_corpus_path());
  const auto corpus_chars = make_tokenizer({}, corpus);
  EXPECT_EQ(corpus_chars->vocab_size(), 65);
  expect_round_trip(*corpus_chars, corpus);
  for (const std::string& text : {kAwkward, source_file()}) expect_round_trip(*make_tokenizer({}, text), text);
}

TEST(Tokenizer, SentencePieceRoundTripsByteForByte) {
  EXPECT_EQ(bpe().vocab_size(), 512);
  EXPECT_NE(bpe().describe().find("512 pieces, byte fallback"), std::string::npos) << bpe().describe();
  // The whole corpus (most of it unseen in training), text with characters it never
  // saw (they become bytes), and code.
  for (const std::string& text : {read_file(default_corpus_path()), kAwkward, source_file()})
    expect_round_trip(bpe(), text);
  const auto unigram = make_tokenizer({"unigram", 400}, corpus_head(100000));
  EXPECT_EQ(unigram->vocab_size(), 400);
  for (const std::string& text : {kAwkward, source_file()}) expect_round_trip(*unigram, text);
  // Subwords: fewer tokens than characters.
  EXPECT_LT(bpe().encode(corpus_head(10000)).size(), 6000u);
}

TEST(Tokenizer, MetadataReadsBackTheSameTokenizer) {
  const auto chars_of_text = make_tokenizer({}, kAwkward);
  for (const Tokenizer* t : {&bpe(), static_cast<const Tokenizer*>(chars_of_text.get())}) {
    const auto back = load_tokenizer(t->metadata(), "test");
    EXPECT_EQ(back->kind(), std::string(t->kind()));
    EXPECT_EQ(back->fingerprint(), t->fingerprint());
    EXPECT_EQ(back->encode(kAwkward), t->encode(kAwkward));
  }
  // A char vocabulary is stored as checkpoints always stored it: "vocab" alone.
  const TokenizerMetadata chars = make_tokenizer({}, "ba")->metadata();
  ASSERT_EQ(chars.size(), 1u);
  EXPECT_EQ(chars[0], (std::pair<std::string, std::string>{"vocab", "ab"}));
  EXPECT_EQ(load_tokenizer({{"vocab", "ab"}}, "old checkpoint")->vocab_size(), 2);
  // The fingerprint tells tokenizers apart and is the same on every training.
  EXPECT_NE(make_tokenizer({}, "ab")->fingerprint(), make_tokenizer({}, "abc")->fingerprint());
  EXPECT_EQ(make_tokenizer({"bpe", 512}, corpus_head(200000))->fingerprint(), bpe().fingerprint());
}

TEST(Tokenizer, StreamHoldsSplitCharactersUntilWhole) {
  // "日" is three byte-fallback tokens for a model that never saw it.
  const std::vector<int32_t> ids = bpe().encode("\xE6\x97\xA5!");
  ASSERT_EQ(ids.size(), 4u);
  TokenStream stream(bpe());
  EXPECT_EQ(stream.push(ids[0]), "");
  EXPECT_EQ(stream.push(ids[1]), "");
  EXPECT_EQ(stream.push(ids[2]), "\xE6\x97\xA5");
  EXPECT_EQ(stream.push(ids[3]), "!");
  // A character cut off at the end, or bytes that never form one, come out as U+FFFD.
  EXPECT_EQ(stream.push(ids[0]), "");
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.push(ids[1]), "\xEF\xBF\xBD");  // a lone continuation byte
  EXPECT_EQ(stream.finish(), "");
}

TEST(Tokenizer, VisibleTokens) {
  EXPECT_EQ(visible_token(" the"), "\xE2\x90\xA3the");
  EXPECT_EQ(visible_token("\n\t\r"), "\\n\\t\\r");
  EXPECT_EQ(visible_token("\xE6\x97"), "<0xE6><0x97>");
  EXPECT_EQ(visible_token("\x01\xC3\xA9"), "<0x01>\xC3\xA9");
}

TEST(Tokenizer, Base64) {
  for (const std::string& s : {std::string(""), std::string("f"), std::string("fo"), std::string("foo"),
                               std::string("foob"), std::string("\0\xFF\x10", 3)})
    EXPECT_EQ(base64_decode(base64_encode(s)), s);
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  for (const char* bad : {"Zm9", "Zm9vYg=x", "Zm=vYg==", "Zm9vYh==", "Zm9v!g=="}) EXPECT_FALSE(base64_decode(bad)) << bad;
}

TEST(Tokenizer, BadInputIsNamed) {
  // A size SentencePiece cannot reach on this text, both ways.
  expect_error([] { make_tokenizer({"bpe", 256}, corpus_head(20000)); },
               {"--vocab-size 256 is too small", "at least 3"});
  expect_error([] { make_tokenizer({"unigram", 50000}, corpus_head(20000)); },
               {"--vocab-size 50000 is more than unigram can make of this text: at most"});
  expect_error([] { make_tokenizer({"char", 100}, "abc"); }, {"--vocab-size goes with bpe or unigram"});
  expect_error([] { make_tokenizer({"bpe", int64_t(1) << 30}, "abc"); }, {"--vocab-size 1073741824 outside"});
  // A file that is not a SentencePiece model, and one that is not there.
  const testing::TempDir dir("tokenizer");
  testing::spit(dir.path / "not.model", "hello, I am text");
  expect_error([&] { make_tokenizer({dir / "not.model"}, "abc"); }, {dir / "not.model", "not a SentencePiece model"});
  expect_error([&] { make_tokenizer({dir / "missing.model"}, "abc"); }, {"missing.model", "cannot open"});
  // Damaged checkpoint metadata.
  expect_error([] { load_tokenizer({{"tokenizer", "spm"}, {"tokenizer_model", "@@@@"}}, "ck"); }, {"ck", "not base64"});
  expect_error([] { load_tokenizer({{"tokenizer", "spm"}, {"tokenizer_model", base64_encode("junk")}}, "ck"); },
               {"ck", "tokenizer_model", "not a SentencePiece model"});
  expect_error([] { load_tokenizer({{"tokenizer", "spm"}}, "ck"); }, {"ck", "tokenizer_model is missing"});
  expect_error([] { load_tokenizer({{"tokenizer", "gpt2"}}, "ck"); }, {"ck", "unknown kind \"gpt2\""});
  expect_error([] { load_tokenizer({}, "ck"); }, {"ck", "vocab is missing"});
  // Text a char vocabulary cannot encode: the first character, where, and how many.
  expect_error([] { make_tokenizer({}, "abc")->encode("abXcYX"); },
               {"'X' (U+0058) at position 2", "3 characters of the text are not, 2 distinct", "folio info"});
  expect_error([] { bpe().decode(std::vector<int32_t>{0, 512}); }, {"id 512", "[0, 512)"});
  expect_error([] { bpe().encode("\xFF"); }, {"invalid UTF-8"});
}

}  // namespace
}  // namespace folio
