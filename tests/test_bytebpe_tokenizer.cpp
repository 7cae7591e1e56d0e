// GPT-2's byte-level BPE (data/bytebpe_tokenizer.cpp) on a vocabulary small enough to
// follow by hand: the merge order, the round trip of any text, the checkpoint's copy,
// and every way its files can be wrong. GPT-2's own vocabulary is checked against
// js-tiktoken by tests/test_bytebpe_tokenizer.sh.
#include <gtest/gtest.h>

#include <string>

#include "data/base64.h"
#include "data/tokenizer.h"
#include "tests/support.h"

namespace folio {
namespace {

using testing::expect_error;
using testing::spit;
using testing::TempDir;

// The 256 bytes (rank = byte), then "he" (256), "the" (257) and " the" (258).
std::string tiny_tiktoken() {
  std::string lines;
  for (int b = 0; b < 256; ++b) lines += base64_encode(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  lines += base64_encode("he") + " 256\n" + base64_encode("the") + " 257\n" + base64_encode(" the") + " 258\n";
  return lines;
}

std::unique_ptr<Tokenizer> tiny(const TempDir& dir) {
  spit(dir / "tiny.tiktoken", tiny_tiktoken());
  return make_tokenizer({dir / "tiny.tiktoken"}, "");
}

TEST(ByteBpe, MergesTheLowestRankFirstAndTheLeftmostOnATie) {
  TempDir dir("bytebpe_merge");
  const auto t = tiny(dir);
  EXPECT_EQ(t->kind(), std::string("bytebpe"));
  EXPECT_EQ(t->vocab_size(), 260);  // 259 ranks and <|endoftext|>
  EXPECT_EQ(t->end_of_text(), 259);
  EXPECT_EQ(t->encode(" the"), (std::vector<int32_t>{258}));  // a whole piece that is a token
  // "thethe": t,h,e,t,h,e -> t,he,t,h,e -> t,he,t,he -> the,t,he -> the,the.
  EXPECT_EQ(t->encode("thethe"), (std::vector<int32_t>{257, 257}));
  // GPT-2's pattern cuts "the the" into "the" and " the"; "'s" is its own piece.
  EXPECT_EQ(t->encode("the the's"), (std::vector<int32_t>{257, 258, '\'', 's'}));
  EXPECT_EQ(t->token_bytes(259), "");  // end-of-text adds no text
}

TEST(ByteBpe, DecodesEveryTextBackToItsBytes) {
  TempDir dir("bytebpe_round");
  const auto t = tiny(dir);
  for (const std::string text : {"", " ", "the  the\t\r\nthe", "日本語 👩‍👩‍👧 e\xCC\x81", "x<|endoftext|>y", "   \n\n  "})
    EXPECT_EQ(t->decode(t->encode(text)), text) << text;
  expect_error([&] { t->encode("ab\xFF"); }, {"[tokenizer]", "invalid UTF-8 at byte offset 2"});
  expect_error([&] { t->token_bytes(260); }, {"id 260", "[0, 260)"});
}

TEST(ByteBpe, TheCheckpointsCopyIsTheSameTokenizer) {
  TempDir dir("bytebpe_meta");
  const auto t = tiny(dir);
  const auto back = load_tokenizer(t->metadata(), "run/model.safetensors");
  EXPECT_EQ(back->fingerprint(), t->fingerprint());
  EXPECT_EQ(back->encode("thethe the"), t->encode("thethe the"));
  TokenizerMetadata broken = t->metadata();
  broken[2].second += "notbase64! x\n";
  expect_error([&] { load_tokenizer(broken, "run/model.safetensors"); },
               {"run/model.safetensors", "bytebpe_tokens line 261"});
}

TEST(ByteBpe, HfFilesGiveTheSameIdsAsTheRankFile) {
  TempDir dir("bytebpe_hf");
  const auto t = tiny(dir);
  // GPT-2's byte characters: printable bytes are themselves, ' ' is U+0120 ('Ġ').
  const std::string merges = "#version: 0.2\nh e\nt he\nĠ the\n";
  std::string json = "{";
  const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> m{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b)
      m[size_t(b)] = ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) ? char32_t(b) : next++;
    return m;
  }();
  auto utf8 = [](char32_t c) {
    std::string s;
    if (c < 0x80) s += char(c);
    else s += char(0xC0 | (c >> 6)), s += char(0x80 | (c & 0x3F));
    return s;
  };
  auto escaped = [&](const std::string& s) {
    std::string out;
    for (const char c : s) out += c == '"' ? "\\\"" : c == '\\' ? "\\\\" : std::string(1, c);
    return out;
  };
  for (int b = 0; b < 256; ++b) json += "\"" + escaped(utf8(table[size_t(b)])) + "\": " + std::to_string(b) + ", ";
  json += "\"he\": 256, \"the\": 257, \"Ġthe\": 258, \"<|endoftext|>\": 259}";
  spit(dir / "vocab.json", json);
  spit(dir / "merges.txt", merges);
  const auto hf = make_tokenizer({dir.path.string()}, "");
  for (const std::string text : {"thethe the", " the the's", "ab the\tthe"})
    EXPECT_EQ(hf->encode(text), t->encode(text)) << text;
  EXPECT_EQ(hf->end_of_text(), 259);

  spit(dir / "merges.txt", "#version: 0.2\nh e\nt hx\n");
  expect_error([&] { make_tokenizer({dir / "vocab.json"}, ""); },
               {"merges.txt line 3", "is not in", "vocab.json", "belong together"});
  std::filesystem::remove(dir.path / "merges.txt");
  expect_error([&] { make_tokenizer({dir.path.string()}, ""); }, {"merges.txt", "cannot open"});
  spit(dir / "vocab.json", "{\"a\": 0}");
  expect_error([&] { make_tokenizer({dir / "vocab.json"}, ""); }, {"vocab.json", "no <|endoftext|> token"});
  spit(dir / "vocab.json", "[1, 2]");
  expect_error([&] { make_tokenizer({dir / "vocab.json"}, ""); }, {"vocab.json", "expected an object"});
}

TEST(ByteBpe, ABadRankFileIsRefusedWithItsLine) {
  TempDir dir("bytebpe_bad");
  spit(dir / "a.tiktoken", base64_encode("a") + " 0\n" + base64_encode("b") + " 5\n");
  expect_error([&] { make_tokenizer({dir / "a.tiktoken"}, ""); }, {"a.tiktoken line 2", "ranks in order from 0"});
  spit(dir / "a.tiktoken", base64_encode("a") + " 0\n");
  expect_error([&] { make_tokenizer({dir / "a.tiktoken"}, ""); }, {"byte 0 has no token", "all 256"});
  spit(dir / "a.tiktoken", tiny_tiktoken() + base64_encode("he") + " 259\n");
  expect_error([&] { make_tokenizer({dir / "a.tiktoken"}, ""); }, {"token 259 repeats the bytes of token 256"});
}

}  // namespace
}  // namespace folio
