// Token shards, token sequences, the batch sampler, token directories and the token
// sources TrainingData reads: the llm.c layout byte for byte, every bad file refused
// with one line, and the epoch order a true permutation that resumes exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <fstream>
#include <set>

#include "data/batch_sampler.h"
#include "data/token_dir.h"
#include "data/token_manifest.h"
#include "data/token_shard.h"
#include "data/dataset.h"
#include "support.h"

namespace folio {
namespace {

using testing::expect_error;
using testing::slurp;
using testing::spit;
using testing::TempDir;

int32_t i32_at(const std::string& bytes, size_t at) {
  int32_t v;
  std::memcpy(&v, bytes.data() + at, 4);
  return v;
}

std::string write_shard(const std::string& path, const std::vector<int32_t>& ids, int width) {
  ShardWriter w(path, width);
  w.append(ids);
  w.finish();
  return path;
}

TEST(TokenShard, WritesLlmcLayoutExactly) {
  TempDir dir("shard_layout");
  std::vector<int32_t> ids(1000);
  std::iota(ids.begin(), ids.end(), 60000);  // near the top of uint16
  write_shard(dir / "a.bin", ids, 2);
  const std::string bytes = slurp(dir / "a.bin");
  ASSERT_EQ(bytes.size(), 1024u + 2 * ids.size());
  EXPECT_EQ(i32_at(bytes, 0), 20240520);
  EXPECT_EQ(i32_at(bytes, 4), 1);
  EXPECT_EQ(i32_at(bytes, 8), 1000);
  for (size_t i = 12; i < 1024; ++i) ASSERT_EQ(bytes[i], 0) << "header byte " << i;
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto lo = static_cast<unsigned char>(bytes[1024 + 2 * i]), hi = static_cast<unsigned char>(bytes[1025 + 2 * i]);
    ASSERT_EQ(lo | hi << 8, ids[i]);
  }
  // Above 65,536 ids: version 7, uint32.
  ids.push_back(70000);
  write_shard(dir / "b.bin", ids, 4);
  const std::string wide = slurp(dir / "b.bin");
  EXPECT_EQ(i32_at(wide, 4), 7);
  EXPECT_EQ(i32_at(wide, 8), 1001);
  EXPECT_EQ(i32_at(wide, 1024 + 4 * 1000), 70000);
}

TEST(TokenShard, ReadsBackWhatItWroteWithItsChecksum) {
  TempDir dir("shard_read");
  for (int width : {2, 4}) {
    std::vector<int32_t> ids(12345);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 7919) % 50000);
    ShardWriter w(dir / "s.bin", width);
    w.append(std::span(ids).first(100));
    w.append(std::span(ids).subspan(100));  // appends chain, in any pieces
    const uint64_t checksum = w.finish();
    const ShardFile s = ShardFile::open(dir / "s.bin");
    EXPECT_EQ(s.width(), width);
    ASSERT_EQ(s.tokens(), int64_t(ids.size()));
    const ShardFile::Scan scan = s.scan();
    EXPECT_EQ(scan.checksum, checksum);
    EXPECT_EQ(scan.max_id, *std::max_element(ids.begin(), ids.end()));
    TokenSequence seq;
    seq.append_file(s.fd(), s.header_bytes(), s.width(), s.tokens(), &s.path());
    std::vector<int32_t> back(ids.size());
    seq.read(0, seq.size(), back.data());
    EXPECT_EQ(back, ids);
  }
}

TEST(TokenShard, AnUnfinishedWriterLeavesNoFile) {
  TempDir dir("shard_unfinished");
  {
    ShardWriter w(dir / "s.bin", 2);
    w.append(std::vector<int32_t>{1, 2, 3});
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "s.bin"));
}

TEST(TokenShard, RefusesBadFilesWithOneLine) {
  TempDir dir("shard_bad");
  const std::string good = write_shard(dir / "good.bin", {1, 2, 3, 4}, 2);
  std::string bytes = slurp(good);
  auto with = [&](const std::string& name, std::string b) {
    spit(dir / name, b);
    return dir / name;
  };
  std::string bad_magic = bytes;
  bad_magic[0] = 7;
  expect_error([&] { ShardFile::open(with("magic.bin", bad_magic)); }, {"magic.bin", "magic", "expected 20240520"});
  std::string bad_version = bytes;
  bad_version[4] = 3;
  expect_error([&] { ShardFile::open(with("version.bin", bad_version)); }, {"version.bin", "version 3", "expected 1"});
  expect_error([&] { ShardFile::open(with("short.bin", bytes.substr(0, bytes.size() - 1))); },
               {"short.bin", "header says 4 tokens", "expected 1032 bytes"});
  expect_error([&] { ShardFile::open(with("long.bin", bytes + "xx")); }, {"long.bin", "expected 1032 bytes"});
  expect_error([&] { ShardFile::open(with("tiny.bin", "abc")); }, {"tiny.bin", "shorter than"});
  expect_error([&] { ShardFile::open(dir / "absent.bin"); }, {"absent.bin", "cannot open"});
  expect_error([&] { ShardFile::open(with("odd.bin", "abc"), false, 2); }, {"odd.bin", "whole number"});
}

TEST(TokenSequence, ReadsWindowsAcrossPiecesOfEitherWidth) {
  const std::vector<uint16_t> a = {0, 1, 2, 3, 4};
  const std::vector<int32_t> b = {5, 6, 7};
  const std::vector<uint16_t> c = {8, 9};
  TokenSequence seq;
  seq.append(a.data(), 2, 5);
  seq.append(b.data(), 4, 3);
  seq.append(c.data(), 2, 2);
  ASSERT_EQ(seq.size(), 10);
  for (int64_t pos = 0; pos < 10; ++pos)
    for (int64_t n = 0; pos + n <= 10; ++n) {
      std::vector<int32_t> out(size_t(n), -1);
      seq.read(pos, n, out.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[size_t(i)], pos + i) << pos << "+" << i;
    }
  int32_t x;
  expect_error([&] { seq.read(8, 3, &x); }, {"[data]", "outside [0, 10)"});
}

TEST(BatchSampler, RandomIsTheSameStreamAsBefore) {
  std::vector<int32_t> tokens(1000);
  std::iota(tokens.begin(), tokens.end(), 0);
  BatchSampler sampler(Sampling::random, 42);
  Rng rng(42);
  Batch batch;
  for (int step = 0; step < 5; ++step) {
    sampler.next(tokens, 4, 16, batch);
    for (int64_t b = 0; b < 4; ++b) {
      const auto start = int32_t(rng.below(1000 - 16));
      EXPECT_EQ(batch.inputs[size_t(b * 16)], start);
      EXPECT_EQ(batch.targets[size_t(b * 16 + 15)], start + 16);
    }
  }
}

TEST(BatchSampler, AnEpochVisitsEveryWindowOnce) {
  for (int64_t n : {17, 100, 129, 1000, 4097}) {
    const int64_t T = 8;
    BatchSampler sampler(Sampling::epoch, 7);
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      const auto [phase, windows] = sampler.layout(epoch, n, T);
      ASSERT_GE(windows, 1);
      ASSERT_LE(phase + windows * T + 1, n) << "the last window's target is inside";
      std::set<int64_t> starts;
      for (int64_t k = 0; k < windows; ++k) starts.insert(sampler.window_start(epoch, k, n, T));
      ASSERT_EQ(int64_t(starts.size()), windows) << "n " << n << " epoch " << epoch;
      for (const int64_t s : starts) ASSERT_EQ((s - phase) % T, 0);
      EXPECT_EQ(*starts.begin(), phase);
      EXPECT_EQ(*starts.rbegin(), phase + (windows - 1) * T);
    }
  }
  // Not the identity: a shuffle.
  BatchSampler sampler(Sampling::epoch, 7);
  int64_t in_place = 0;
  for (int64_t k = 0; k < 100; ++k) in_place += sampler.window_start(0, k, 1000 * 8 + 1, 8) == k * 8;
  EXPECT_LT(in_place, 10);
}

TEST(BatchSampler, EpochResumesExactlyAndRanksReadDisjointRows) {
  std::vector<int32_t> tokens(5000);
  std::iota(tokens.begin(), tokens.end(), 0);
  BatchSampler whole(Sampling::epoch, 3), first(Sampling::epoch, 3);
  Batch a, b;
  std::set<int32_t> seen;
  for (int step = 0; step < 7; ++step) first.next(tokens, 32, 16, b);
  BatchSampler resumed(Sampling::epoch, 3);
  resumed.restore(first.state());
  for (int step = 0; step < 20; ++step) {  // past the epoch's 312 windows
    whole.next(tokens, 32, 16, a);
    if (step >= 7) {
      resumed.next(tokens, 32, 16, b);
      ASSERT_EQ(a.inputs, b.inputs) << "step " << step;
    }
    if (step < 9) {  // within the first epoch (9 * 32 = 288 < 312 windows): no window twice
      for (int64_t r = 0; r < 32; ++r) ASSERT_TRUE(seen.insert(a.inputs[size_t(r * 16)]).second);
    }
  }
  EXPECT_EQ(whole.state().epoch, 2);
  // A rank reads only its rows; they are the rows of the whole batch.
  BatchSampler full(Sampling::epoch, 3), rank1(Sampling::epoch, 3);
  full.next(tokens, 8, 16, a);
  rank1.next(tokens, 8, 16, b, 4, 8);
  EXPECT_TRUE(std::equal(a.inputs.begin() + 64, a.inputs.end(), b.inputs.begin() + 64));
  EXPECT_EQ(full.state().position, rank1.state().position);
}

// A token directory with a manifest, written by hand here (tokenize has its own tests).
struct HandMadeDir {
  TempDir dir{"tokdir"};
  TokenManifest m;
  HandMadeDir() {
    m.tokenizer = make_tokenizer({"char", 0, true}, "abc")->metadata();
    m.vocab_size = 4, m.end_of_text = 3, m.token_bytes = 2;
    for (auto [name, entry] : {std::pair{"train_000000.bin", &m.train}, std::pair{"val_000000.bin", &m.val}}) {
      ShardWriter w(dir / name, 2);
      w.append(std::vector<int32_t>{3, 0, 1, 2, 0, 1, 2, 3, 2, 1});
      entry->shards.push_back({name, 10, w.finish()});
      entry->tokens = 10, entry->bytes = 8, entry->chars = 8, entry->documents = 2;
    }
  }
  void write() const { spit(dir / "manifest.json", m.to_json()); }
};

TEST(TokenDir, OpensAManifestAndItsShards) {
  HandMadeDir h;
  h.write();
  const TokenDir d = TokenDir::open(h.dir.path.string());
  EXPECT_EQ(d.layout, "folio");
  EXPECT_EQ(d.tokenizer->vocab_size(), 4);
  EXPECT_EQ(d.train.size(), 10);
  EXPECT_EQ(d.val[7], 3);
  EXPECT_EQ(d.val_bytes, 8);
  EXPECT_EQ(d.fingerprint, h.m.fingerprint());
}

// TrainingData reads both kinds of --data through TokenSource: what it holds is what
// the source gives, and the source keeps the sequences' tokens alive.
TEST(TokenSource, TrainingDataHoldsWhatEitherSourceGives) {
  HandMadeDir h;
  h.write();
  TempDir text_dir("text");
  const std::string text = text_dir / "t.txt";
  spit(text, "abcabc\xff" "abcab");  // one stray byte, read as U+FFFD
  for (const std::string& path : {h.dir.path.string(), text}) {
    const TrainingData d = TrainingData::open(path, 0.5, TokenizerSpec{"char", 0});
    ASSERT_TRUE(d.source);
    const TokenSource& s = *d.source;
    EXPECT_EQ(d.kind, s.kind());
    EXPECT_EQ(d.tokenizer, s.tokenizer());
    EXPECT_EQ(d.train.size(), s.train().size());
    EXPECT_EQ(d.val[1], s.val()[1]);
    EXPECT_EQ(d.val_bytes, s.text_size().val_bytes);
    EXPECT_EQ(d.fingerprint, s.fingerprint());
  }
  const TrainingData dir = TrainingData::open(h.dir.path.string(), 0.5, TokenizerSpec{"char", 0});
  EXPECT_EQ(dir.kind, "folio");
  EXPECT_EQ(dir.val_bytes, 8);
  EXPECT_EQ(dir.fingerprint, h.m.fingerprint());
  const TrainingData t = TrainingData::open(text, 0.5, TokenizerSpec{"char", 0});
  EXPECT_EQ(t.kind, "text");
  EXPECT_EQ(t.invalid_utf8_bytes, 1);
  EXPECT_EQ(t.train.size() + t.val.size(), 12);  // characters, U+FFFD among them
  // A text's fingerprint is of its bytes, whatever the split: another text has another.
  EXPECT_EQ(t.fingerprint.size(), 16u);
  EXPECT_EQ(TrainingData::open(text, 0.25, TokenizerSpec{"char", 0}).fingerprint, t.fingerprint);
  spit(text, std::string("abcabc\xff" "abcab\0", 13));  // a NUL more: the length tells
  EXPECT_NE(TrainingData::open(text, 0.5, TokenizerSpec{"char", 0}).fingerprint, t.fingerprint);
}

TEST(TokenDir, RefusesWhatIsWrongWithOneLineEach) {
  {
    HandMadeDir h;
    h.m.train.shards[0].file = "train_000001.bin";
    h.write();
    expect_error([&] { TokenDir::open(h.dir.path.string()); }, {"names the shard train_000001.bin", "missing"});
  }
  {
    HandMadeDir h;
    h.m.val.shards[0].checksum ^= 1;
    h.write();
    expect_error([&] { TokenDir::open(h.dir.path.string()); }, {"val_000000.bin", "changed", "folio tokenize again"});
  }
  {
    HandMadeDir h;
    ShardWriter w(h.dir / "val_000000.bin", 2);  // an id past the vocabulary of 4
    w.append(std::vector<int32_t>{3, 0, 1, 2, 0, 1, 2, 9, 2, 1});
    h.m.val.shards[0].checksum = w.finish();
    h.write();
    expect_error([&] { TokenDir::open(h.dir.path.string()); }, {"val_000000.bin", "token id 9", "vocabulary of 4"});
  }
  {
    HandMadeDir h;
    h.m.train.tokens = 11;
    h.write();
    expect_error([&] { TokenDir::open(h.dir.path.string()); }, {"splits.train", "tokens is 11", "shards hold 10"});
  }
  {
    HandMadeDir h;
    h.write();
    spit(h.dir / ".tokenize-incomplete", "");
    expect_error([&] { TokenDir::open(h.dir.path.string()); }, {"did not finish", "run it again"});
  }
  {
    TempDir empty("tokdir_empty");
    expect_error([&] { TokenDir::open(empty.path.string()); }, {"not a token directory", "manifest.json"});
    write_shard(empty / "train_000000.bin", {1, 2, 3}, 2);  // folio's name, no manifest: not llm.c's
    expect_error([&] { TokenDir::open(empty.path.string(), 10); }, {"not a token directory"});
  }
}

TEST(TokenDir, ReadsLlmcAndNanoGptFilesGivenTheVocabulary) {
  TempDir dir("tokdir_foreign");
  std::filesystem::create_directories(dir / "llmc");
  std::filesystem::create_directories(dir / "nano");
  write_shard(dir / "llmc/tiny_val_000000.bin", {5, 6, 7, 8}, 2);
  write_shard(dir / "llmc/tiny_train_000001.bin", {1, 2, 3}, 2);
  write_shard(dir / "llmc/tiny_train_000002.bin", {4, 5}, 2);
  expect_error([&] { TokenDir::open(dir / "llmc"); }, {"llm.c", "--vocab-size", "50257"});
  const TokenDir l = TokenDir::open(dir / "llmc", 50257);
  EXPECT_EQ(l.layout, "llm.c");
  EXPECT_EQ(l.train.size(), 5);
  EXPECT_EQ(l.train[4], 5);
  EXPECT_EQ(l.tokenizer->decode(std::vector<int32_t>{5, 7}), "<|5|><|7|>");
  expect_error([&] { TokenDir::open(dir / "llmc", 5); }, {"tiny_train_000002.bin", "token id 5", "vocabulary of 5"});
  spit(dir / "nano/train.bin", std::string("\x01\x00\x02\x00\x03\x01", 6));
  expect_error([&] { TokenDir::open(dir / "nano", 300); }, {"no validation", "val.bin"});
  spit(dir / "nano/val.bin", std::string("\x04\x00\x05\x00", 4));
  const TokenDir n = TokenDir::open(dir / "nano", 300);
  EXPECT_EQ(n.layout, "nanoGPT");
  EXPECT_EQ(n.train[2], 259);
  EXPECT_EQ(n.val.size(), 2);
}

}  // namespace
}  // namespace folio

namespace folio {
namespace {

TEST(TokenDir, ReadingWindowsKeepsNothingResident) {
  TempDir dir("tokdir_resident");
  const std::string file = dir / "train_000000.bin";
  {
    ShardWriter w(file, 2);
    std::vector<int32_t> ids(1 << 20);
    for (int i = 0; i < 20; ++i) w.append(ids);  // 40 MB of tokens
    w.finish();
  }
  const ShardFile s = ShardFile::open(file);
  TokenSequence seq;
  seq.append_file(s.fd(), s.header_bytes(), 2, s.tokens(), &s.path());
  auto rss_kb = [] {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
      if (line.starts_with("VmRSS:")) return int64_t(std::stoll(line.substr(6)));
    return int64_t(0);
  };
  const int64_t before = rss_kb();
  Rng rng(1);
  std::vector<int32_t> window(65);
  for (int i = 0; i < 20000; ++i) seq.read(int64_t(rng.below(uint64_t(s.tokens() - 65))), 65, window.data());
  // 20,000 windows over 40 MB touch nearly every page; none of it stays in this process.
  EXPECT_LT(rss_kb() - before, 4 * 1024);
}

}  // namespace
}  // namespace folio
