// The data module: UTF-8, the character vocabulary, splits, batches, file errors.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "base/error.h"
#include "data/batch_sampler.h"
#include "data/dataset.h"
#include "data/vocab.h"
#include "tests/support.h"

namespace folio {
namespace {

using testing::expect_error;

// A file under the test temp dir, removed when the test ends.
struct TempFile {
  std::filesystem::path path;
  TempFile(const std::string& name, const std::string& contents)
      : path(std::filesystem::path(::testing::TempDir()) / (std::to_string(getpid()) + "_" + name)) {
    std::ofstream(path, std::ios::binary) << contents;
  }
  ~TempFile() { std::filesystem::remove(path); }
};

std::vector<int32_t> iota_tokens(int n) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), 0);
  return t;
}

// ---- bundled corpus ----

TEST(Data, BundledCorpus) {
  const std::string bytes = read_file(default_corpus_path());
  EXPECT_EQ(bytes.size(), 1115394u);
  const std::vector<char32_t> text = decode_utf8(bytes, default_corpus_path());
  const Vocab vocab = Vocab::from_text(text);
  EXPECT_EQ(vocab.size(), 65);
  EXPECT_EQ(vocab.chars().front(), U'\n');  // sorted: newline is the smallest character
  const std::vector<int32_t> ids = vocab.encode(text);
  EXPECT_EQ(vocab.decode(ids), bytes);
}

TEST(Data, CorpusLoadSplitsWholeText) {
  const Corpus c = Corpus::load(default_corpus_path(), 0.9, TokenizerSpec{});
  EXPECT_EQ(c.tokenizer->vocab_size(), 65);
  EXPECT_EQ(c.split.train.size(), 1003854u);  // floor(1115394 * 0.9)
  EXPECT_EQ(c.split.train.size() + c.split.val.size(), 1115394u);
  EXPECT_EQ(c.path, default_corpus_path());
}

// Bytes that are not UTF-8 are read as U+FFFD and counted, as folio tokenize does.
TEST(Data, CorpusLoadReplacesBadUtf8) {
  const TempFile f("bad_utf8.txt", "hello\xFFworld");
  const Corpus c = Corpus::load(f.path.string(), 0.5, TokenizerSpec{});
  EXPECT_EQ(c.invalid_utf8_bytes, 1);
  EXPECT_EQ(c.tokenizer->decode(c.split.train) + c.tokenizer->decode(c.split.val), "hello\xEF\xBF\xBDworld");
}

// ---- UTF-8 ----

TEST(Vocab, MultiByteCharactersRoundTrip) {
  const std::string s = "caf\xC3\xA9 \xE2\x80\x94 ok \xF0\x9F\x98\x80!";  // "café — ok 😀!"
  const std::vector<char32_t> text = decode_utf8(s);
  const Vocab v = Vocab::from_text(text);
  EXPECT_TRUE(v.contains(U'\u00E9'));
  EXPECT_TRUE(v.contains(U'\u2014'));
  EXPECT_TRUE(v.contains(U'\U0001F600'));
  EXPECT_EQ(v.chars().back(), U'\U0001F600');  // sorted, the astral one last
  EXPECT_EQ(v.decode(v.encode(s)), s);
  EXPECT_EQ(encode_utf8(text), s);
}

TEST(Vocab, InvalidUtf8NamesByteOffset) {
  struct Case {
    std::string bytes;
    const char* offset;
  };
  const Case cases[] = {
      {"ab\x80", "byte offset 2"},              // lone continuation byte
      {"abc\xC3", "byte offset 3"},             // truncated 2-byte sequence at end
      {"a\xC0\xAF", "byte offset 1"},           // overlong '/'
      {"abcd\xED\xA0\x80", "byte offset 4"},    // surrogate U+D800
      {"\xF5\x80\x80\x80", "byte offset 0"},    // F5 can never lead
      {"x\xC3\x41", "byte offset 1"},           // bad continuation
      {"xy\xF4\x90\x80\x80", "byte offset 2"},  // U+110000
  };
  for (const Case& c : cases)
    expect_error([&] { decode_utf8(c.bytes, "sample.txt"); },
                 {"[utf8] sample.txt: invalid UTF-8 at ", c.offset});
}

// ---- vocabulary ----

TEST(Vocab, Utf8StringRoundTrip) {
  const Vocab v = Vocab::from_text(decode_utf8("hello, w\xC3\xB6rld \xF0\x9F\x98\x80\n"));
  const Vocab w = Vocab::from_utf8(v.to_utf8());
  EXPECT_EQ(w.chars(), v.chars());
  EXPECT_EQ(v.to_utf8(), "\n ,dehlorw\xC3\xB6\xF0\x9F\x98\x80");
}

TEST(Vocab, RejectsUnsortedOrDuplicate) {
  expect_error([] { Vocab(std::vector<char32_t>{U'a', U'c', U'b'}); }, {"[vocab]", "sorted", "'b' (U+0062)"});
  expect_error([] { Vocab(std::vector<char32_t>{U'a', U'b', U'b'}); }, {"[vocab]", "twice", "'b' (U+0062)"});
  expect_error([] { Vocab::from_utf8("ba"); }, {"[vocab]", "sorted"});
  expect_error([] { Vocab::from_utf8("abb"); }, {"[vocab]", "twice"});
  expect_error([] { Vocab::from_utf8("a\xFF"); }, {"[utf8]", "byte offset 1"});
  expect_error([] { Vocab(std::vector<char32_t>{U'a', char32_t(0xD800)}); }, {"[vocab]", "U+D800"});
}

TEST(Vocab, UnknownCharacterIsNamed) {
  const Vocab v = Vocab::from_text(decode_utf8("abc"));
  expect_error([&] { v.id(U'X'); }, {"[vocab] character 'X' (U+0058) is not in the vocabulary"});
  expect_error([&] { v.encode("ab\xC3\xA9"); }, {"[vocab]", "'\xC3\xA9' (U+00E9)", "position 2"});
  expect_error([&] { v.encode("a\nb"); }, {"'\\n' (U+000A)", "position 1"});
  EXPECT_FALSE(v.contains(U'\U0001F600'));
}

TEST(Vocab, IdsAreSortedPositions) {
  const Vocab v = Vocab::from_text(decode_utf8("hello"));
  EXPECT_EQ(v.size(), 4);  // e h l o
  EXPECT_EQ(v.encode("hello"), (std::vector<int32_t>{1, 0, 2, 2, 3}));
}

TEST(Vocab, DecodeRejectsOutOfRangeId) {
  const Vocab v = Vocab::from_text(decode_utf8("abc"));
  expect_error([&] { v.decode(std::vector<int32_t>{0, 3}); }, {"[vocab]", "id 3", "[0, 3)"});
  expect_error([&] { v.decode(std::vector<int32_t>{-1}); }, {"[vocab]", "id -1"});
}

// ---- split ----

TEST(Data, SplitSizes) {
  const auto tokens = iota_tokens(1000);
  const Split s = split_tokens(tokens, 0.9);
  ASSERT_EQ(s.train.size(), 900u);
  ASSERT_EQ(s.val.size(), 100u);
  EXPECT_EQ(s.train.back(), 899);  // by position: train is the prefix
  EXPECT_EQ(s.val.front(), 900);
  const Split all = split_tokens(tokens, 1.0);
  EXPECT_EQ(all.train.size(), 1000u);
  EXPECT_TRUE(all.val.empty());
}

TEST(Data, SplitRejectsBadFraction) {
  const auto tokens = iota_tokens(10);
  for (double f : {0.0, -0.5, 1.5, std::nan("")})
    expect_error([&] { split_tokens(tokens, f); }, {"[data]", "(0, 1]"});
}

// ---- batches ----

TEST(Data, BatchTargetsAreShiftedInputs) {
  const std::vector<int32_t> tokens = Vocab::from_text(decode_utf8("abcdefghij")).encode("jihgfedcbaabcdefghij");
  Rng rng(1);
  Batch batch;
  sample_batch(tokens, 4, 8, rng, batch);
  ASSERT_EQ(batch.B, 4);
  ASSERT_EQ(batch.T, 8);
  ASSERT_EQ(batch.inputs.size(), 32u);
  ASSERT_EQ(batch.targets.size(), 32u);
  for (int b = 0; b < 4; ++b) {
    const int32_t* x = &batch.inputs[b * 8];
    const int32_t* y = &batch.targets[b * 8];
    for (int t = 0; t + 1 < 8; ++t) EXPECT_EQ(x[t + 1], y[t]);
    // The row is the window of T + 1 tokens at some start s.
    bool found = false;
    for (size_t s = 0; s + 8 < tokens.size() && !found; ++s)
      found = std::equal(x, x + 8, tokens.begin() + s) && y[7] == tokens[s + 8];
    EXPECT_TRUE(found) << "row " << b << " is not a contiguous window";
  }
}

TEST(Data, BatchIsReproducibleFromSeed) {
  const auto tokens = iota_tokens(1000);
  Batch a, b, c;
  Rng r1(42), r2(42), r3(43);
  sample_batch(tokens, 8, 16, r1, a);
  sample_batch(tokens, 8, 16, r2, b);
  sample_batch(tokens, 8, 16, r3, c);
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.targets, b.targets);
  EXPECT_NE(a.inputs, c.inputs);
}

TEST(Data, BatchStartsFollowRngBelow) {
  // With tokens 0..n-1, x[b, 0] is the start itself: it must be what rng.below(n - T)
  // gives, in row order, and every start lies in [0, n - T - 1].
  const int n = 50, T = 10, B = 64;
  const auto tokens = iota_tokens(n);
  Rng rng(7), ref(7);
  Batch batch;
  sample_batch(tokens, B, T, rng, batch);
  int64_t lo = n, hi = -1;
  for (int b = 0; b < B; ++b) {
    const int64_t start = batch.inputs[b * T];
    EXPECT_EQ(uint64_t(start), ref.below(n - T));
    lo = std::min(lo, start);
    hi = std::max(hi, start);
  }
  EXPECT_GE(lo, 0);
  EXPECT_LE(hi, n - T - 1);
  // The smallest split that works: exactly T + 1 tokens, the only start is 0.
  const auto tiny = iota_tokens(T + 1);
  sample_batch(tiny, 3, T, rng, batch);
  EXPECT_EQ(batch.targets[3 * T - 1], T);
}

TEST(Data, BatchReusesCapacity) {
  const auto tokens = iota_tokens(100);
  Rng rng(3);
  Batch batch;
  sample_batch(tokens, 4, 8, rng, batch);
  const int32_t* x = batch.inputs.data();
  const int32_t* y = batch.targets.data();
  sample_batch(tokens, 4, 8, rng, batch);
  sample_batch(tokens, 2, 8, rng, batch);  // smaller fits too
  EXPECT_EQ(batch.inputs.data(), x);
  EXPECT_EQ(batch.targets.data(), y);
  EXPECT_EQ(batch.inputs.size(), 16u);
}

TEST(Data, BatchTooShortSplitThrows) {
  const auto tokens = iota_tokens(8);
  Rng rng(0);
  Batch batch;
  expect_error([&] { sample_batch(tokens, 2, 8, rng, batch, "val"); },
               {"[data] val split has 8 tokens, needs at least block_size + 1 = 9"});
  expect_error([&] { sample_batch(tokens, 0, 4, rng, batch); }, {"[data]", "positive"});
}

// ---- files ----

TEST(Data, ReadFileMissing) {
  expect_error([] { read_file("/nonexistent/folio/nothing.txt"); },
               {"[data] /nonexistent/folio/nothing.txt: cannot open (No such file or directory)"});
}

TEST(Data, ReadFileDirectory) {
  const std::string dir = ::testing::TempDir();
  expect_error([&] { read_file(dir); }, {"[data] " + dir + ": is a directory"});
}

TEST(Data, ReadFileEmpty) {
  const TempFile f("empty.txt", "");
  expect_error([&] { read_file(f.path.string()); }, {"[data] " + f.path.string() + ": file is empty"});
  expect_error([&] { Corpus::load(f.path.string(), 0.9, TokenizerSpec{}); }, {"file is empty"});
}

// A device or a FIFO is refused from its type alone, before it is opened: /dev/zero
// would be read without end, and opening a FIFO waits for a writer.
TEST(Data, ReadFileRefusesDevices) {
  expect_error([] { read_file("/dev/zero"); }, {"[data] /dev/zero: is a character device, not a regular file"});
}

TEST(Data, ReadFileRefusesFifosWithoutHanging) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / (std::to_string(getpid()) + "_fifo")).string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  expect_error([&] { read_file(path); }, {"[data] " + path + ": is a FIFO, not a regular file"});
  std::filesystem::remove(path);
}

// Larger than kMaxTextFileBytes: refused from its size, before any byte is read (the
// file is sparse, so it costs no disk).
TEST(Data, ReadFileRefusesFilesOverTheLimit) {
  const TempFile f("huge.txt", "x");
  std::filesystem::resize_file(f.path, uint64_t(kMaxTextFileBytes) + 1);
  expect_error([&] { read_file(f.path.string()); },
               {"[data] " + f.path.string() + ": 1073741825 bytes, more than the limit of 1073741824 (1 GiB)"});
}

TEST(Data, ReadFileContents) {
  const std::string bytes("a\0b\xFF\n", 5);  // binary-safe
  const TempFile f("bytes.bin", bytes);
  EXPECT_EQ(read_file(f.path.string()), bytes);
}

}  // namespace
}  // namespace folio
