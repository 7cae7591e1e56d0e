// The safetensors reader/writer: round trips, byte-level interoperability with the
// format, and saves that fail leaving the old file (broken files: test_safetensors_corrupt).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <limits>

#include "base/error.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "tests/safetensors_files.h"
#include "tests/support.h"

namespace folio {
namespace {

namespace fs = std::filesystem;

using testing::error_of;
using testing::expect_error;
using testing::f32_bytes;
using testing::le64;
using testing::same_bits;
using testing::Safetensors;

std::vector<NamedTensor> sample_tensors() {
  Rng rng(7);
  const float nan_payload = [] {
    const uint32_t bits = 0x7fc12345u;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }();
  return {
      {"scalar", Tensor::scalar(3.5f)},
      {"special", Tensor::from({5}, std::vector<float>{-0.0f, nan_payload, std::numeric_limits<float>::infinity(),
                                                       std::numeric_limits<float>::denorm_min(), 1e-30f})},
      {"layer.0.weight", Tensor::randn({3, 4}, rng)},
      {"four_d", Tensor::randn({2, 1, 3, 2}, rng)},
      {"empty", Tensor::zeros({0, 3})},
      {"\xc3\xa9t\xc3\xa9 \"quoted\"", Tensor::randn({7}, rng)},
  };
}

const Metadata kMeta = {
    {"config", R"({"n_layer": 2, "name": "tiny \"gpt\"", "list": [1, 2]})"},
    {"note", "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93 \xf0\x9f\x98\x80\nline two\ttab"},
    {"empty", ""},
};

TEST_F(Safetensors, RoundTrip) {
  const auto tensors = sample_tensors();
  const std::string path = at("model.safetensors");
  save_safetensors(path, tensors, kMeta);
  const SafetensorsFile f = load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(f.tensors[i].name, tensors[i].name);
    EXPECT_TRUE(same_bits(f.tensors[i].tensor, tensors[i].tensor)) << tensors[i].name;
  }
  EXPECT_EQ(f.tensors[0].tensor.ndim(), 0);
  EXPECT_EQ(f.metadata, kMeta);
  EXPECT_EQ(f.meta("config"), kMeta[0].second);
  EXPECT_EQ(Json::parse(f.meta("config")).find("n_layer")->as_int(), 2);
  ASSERT_NE(f.find("four_d"), nullptr);
  EXPECT_EQ(f.find("four_d")->shape(), Shape({2, 1, 3, 2}));
  EXPECT_EQ(f.find("nope"), nullptr);
  expect_error([&] { f.meta("nope"); }, {"[checkpoint]", "\"nope\""});
}

TEST_F(Safetensors, RoundTripNothing) {
  save_safetensors(at("e.safetensors"), {}, {});
  EXPECT_EQ(testing::slurp(at("e.safetensors")), le64(8) + "{}      ");
  const SafetensorsFile f = load_safetensors(at("e.safetensors"));
  EXPECT_TRUE(f.tensors.empty());
  EXPECT_TRUE(f.metadata.empty());
}

// A file assembled byte by byte the way other writers produce it loads: the reference
// docs' example (F32 instead of I32), no padding, and a pretty-printed header whose
// key order differs from the data order.
TEST_F(Safetensors, LoadsHandWrittenFile) {
  const std::string doc_example =
      std::string("<\x00\x00\x00\x00\x00\x00\x00", 8) + R"({"test":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})" +
      std::string("\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40", 16);
  testing::spit(at("doc.safetensors"), doc_example);
  const SafetensorsFile doc = load_safetensors(at("doc.safetensors"));
  ASSERT_EQ(doc.tensors.size(), 1u);
  EXPECT_EQ(doc.tensors[0].name, "test");
  EXPECT_EQ(doc.tensors[0].tensor.shape(), Shape({2, 2}));
  EXPECT_EQ(doc.tensors[0].tensor.to_vector(), std::vector<float>({1, 2, 3, 4}));

  const std::string header =
      "{\n  \"__metadata__\": {\"format\": \"pt\"},\n"
      "  \"b\": {\"shape\": [2, 2], \"dtype\": \"F32\", \"data_offsets\": [8, 24]},\n"
      "  \"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},\n"
      "  \"s\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [24, 28]}\n}   ";
  const std::string path = raw("py.safetensors", header, f32_bytes({1, 2, 3, 4, 5, 6, -7}));
  const SafetensorsFile f = load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.tensors[0].name, "b");  // header order
  EXPECT_EQ(f.find("a")->to_vector(), std::vector<float>({1, 2}));
  EXPECT_EQ(f.find("b")->to_vector(), std::vector<float>({3, 4, 5, 6}));
  EXPECT_EQ(f.find("s")->item(), -7.0f);
  EXPECT_EQ(f.find("s")->ndim(), 0);
  EXPECT_EQ(f.meta("format"), "pt");
}

// What we write is what a Python reader expects: u64 LE length, a JSON object padded
// with spaces to a multiple of 8, offsets tiling the data section in the given order.
TEST_F(Safetensors, WritesTheFormatsLayout) {
  const std::vector<NamedTensor> tensors = {{"w", Tensor::from({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6})},
                                            {"b", Tensor::from({3}, std::vector<float>{-1, 0.5f, 1e-3f})},
                                            {"s", Tensor::scalar(42)}};
  const std::string path = at("layout.safetensors");
  save_safetensors(path, tensors, {{"step", "100"}});
  const std::string bytes = testing::slurp(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  ASSERT_LE(8 + n, bytes.size());
  EXPECT_EQ((8 + n) % 8, 0u);
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.front(), '{');
  const size_t close = header.rfind('}');
  EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos);  // only space padding
  EXPECT_LT(header.size() - close - 1, 8u);

  const Json h = Json::parse(header);
  const Json::Object& o = h.as_object();
  ASSERT_EQ(o.size(), 4u);
  EXPECT_EQ(o[0].first, "__metadata__");
  EXPECT_EQ(o[0].second.dump(), R"({"step":"100"})");
  EXPECT_EQ(o[1].first, "w");
  EXPECT_EQ(o[1].second.dump(), R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})");
  EXPECT_EQ(o[2].second.dump(), R"({"dtype":"F32","shape":[3],"data_offsets":[24,36]})");
  EXPECT_EQ(o[3].second.dump(), R"({"dtype":"F32","shape":[],"data_offsets":[36,40]})");
  EXPECT_EQ(bytes.substr(8 + n), f32_bytes({1, 2, 3, 4, 5, 6, -1, 0.5f, 1e-3f, 42}));
}

TEST_F(Safetensors, SaveLeavesNoTempFile) {
  save_safetensors(at("m.safetensors"), sample_tensors(), kMeta);
  save_safetensors(at("m.safetensors"), {{"x", Tensor::ones({2})}}, {});  // over an existing file
  EXPECT_EQ(listing(), std::vector<std::string>({"m.safetensors"}));
  EXPECT_EQ(load_safetensors(at("m.safetensors")).tensors.size(), 1u);
}

TEST_F(Safetensors, SaveIntoMissingDirectoryFails) {
  const std::string good = at("good.safetensors");
  save_safetensors(good, sample_tensors(), kMeta);
  const std::string before = testing::slurp(good);
  const std::string bad = at("no_such_dir/model.safetensors");
  expect_error([&] { save_safetensors(bad, sample_tensors(), kMeta); },
               {"[checkpoint] " + bad + ": ", "No such file or directory"});
  EXPECT_EQ(testing::slurp(good), before);
  EXPECT_EQ(listing(), std::vector<std::string>({"good.safetensors"}));
}

// A write that fails halfway (here: the file-size limit, which binds root too) removes
// the temp file and leaves the old checkpoint as it was.
TEST_F(Safetensors, FailedWriteKeepsOldFile) {
  const std::string path = at("model.safetensors");
  save_safetensors(path, {{"small", Tensor::ones({4})}}, {});
  const std::string before = testing::slurp(path);

  rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  rlimit small = old_limit;
  small.rlim_cur = std::min<rlim_t>(4096, old_limit.rlim_max);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string msg = error_of([&] { save_safetensors(path, {{"big", Tensor::zeros({100000})}}, {}); });
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_NE(msg.find("[checkpoint] " + path + ": "), std::string::npos) << msg;
  EXPECT_NE(msg.find("File too large"), std::string::npos) << msg;
  EXPECT_EQ(testing::slurp(path), before);
  EXPECT_EQ(listing(), std::vector<std::string>({"model.safetensors"}));
}

TEST_F(Safetensors, SaveOverDirectoryFails) {
  fs::create_directory(at("adir"));
  expect_error([&] { save_safetensors(at("adir"), {{"x", Tensor::ones({2})}}, {}); },
               {"[checkpoint] " + at("adir") + ": ", "rename", "directory"});
  EXPECT_EQ(listing(), std::vector<std::string>({"adir"}));
}

TEST_F(Safetensors, SaveRejectsBadNames) {
  const std::string p = at("x.safetensors");
  expect_error([&] { save_safetensors(p, {{"", Tensor::ones({1})}}, {}); }, {p, "tensor name", "empty"});
  expect_error([&] { save_safetensors(p, {{"a", Tensor::ones({1})}, {"a", Tensor::ones({1})}}, {}); },
               {p, "\"a\"", "duplicate"});
  expect_error([&] { save_safetensors(p, {{"__metadata__", Tensor::ones({1})}}, {}); }, {p, "reserved"});
  expect_error([&] { save_safetensors(p, {{"a", Tensor()}}, {}); }, {p, "undefined"});
  expect_error([&] { save_safetensors(p, {{"bad\xff", Tensor::ones({1})}}, {}); }, {p, "UTF-8"});
  expect_error([&] { save_safetensors(p, {}, {{"k", "1"}, {"k", "2"}}); }, {p, "__metadata__", "duplicate"});
  EXPECT_TRUE(listing().empty());
}

}  // namespace
}  // namespace folio
