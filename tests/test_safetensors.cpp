// The safetensors reader/writer: round trips, byte-level interoperability with the
// format, and one clear Error (never a crash) per corruption.
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
#include "tests/support.h"

namespace folio {
namespace {

namespace fs = std::filesystem;

using testing::error_of;
using testing::expect_error;


std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = char((n >> (8 * i)) & 0xff);
  return s;
}

// The little-endian bytes of floats, built bit by bit (independent of the writer).
std::string f32_bytes(std::initializer_list<float> values) {
  std::string s;
  for (float v : values) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    for (int i = 0; i < 4; ++i) s += char((u >> (8 * i)) & 0xff);
  }
  return s;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), size_t(a.numel()) * 4) == 0;
}

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "folio_st_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string at(const std::string& name) const { return dir_ + "/" + name; }

  // A file of the format with the given header text and `data` as the data section.
  std::string raw(const std::string& name, const std::string& header, const std::string& data) const {
    const std::string path = at(name);
    write_bytes(path, le64(header.size()) + header + data);
    return path;
  }

  // Loading `path` throws an Error naming the path and every fragment.
  static void expect_load_error(const std::string& path, std::initializer_list<std::string> fragments) {
    const std::string msg = error_of([&] { load_safetensors(path); });
    EXPECT_EQ(msg.rfind("[checkpoint] " + path + ": ", 0), 0u) << msg;
    for (const std::string& frag : fragments) EXPECT_NE(msg.find(frag), std::string::npos) << msg << "\n lacks: " << frag;
  }

  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string dir_;
};

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
  EXPECT_EQ(read_bytes(at("e.safetensors")), le64(8) + "{}      ");
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
  write_bytes(at("doc.safetensors"), doc_example);
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
  const std::string bytes = read_bytes(path);
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
  const std::string before = read_bytes(good);
  const std::string bad = at("no_such_dir/model.safetensors");
  expect_error([&] { save_safetensors(bad, sample_tensors(), kMeta); },
               {"[checkpoint] " + bad + ": ", "No such file or directory"});
  EXPECT_EQ(read_bytes(good), before);
  EXPECT_EQ(listing(), std::vector<std::string>({"good.safetensors"}));
}

// A write that fails halfway (here: the file-size limit, which binds root too) removes
// the temp file and leaves the old checkpoint as it was.
TEST_F(Safetensors, FailedWriteKeepsOldFile) {
  const std::string path = at("model.safetensors");
  save_safetensors(path, {{"small", Tensor::ones({4})}}, {});
  const std::string before = read_bytes(path);

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
  EXPECT_EQ(read_bytes(path), before);
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

// Every proper prefix of a valid file is refused with an Error.
TEST_F(Safetensors, TruncatedAtEveryLength) {
  const std::string good = at("good.safetensors");
  save_safetensors(good, {{"a", Tensor::ones({2, 3})}, {"b", Tensor::scalar(1)}}, {{"k", "v"}});
  const std::string bytes = read_bytes(good);
  const std::string path = at("cut.safetensors");
  for (size_t len = 0; len < bytes.size(); ++len) {
    write_bytes(path, bytes.substr(0, len));
    try {
      load_safetensors(path);
      ADD_FAILURE() << "truncation to " << len << " bytes loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(load_safetensors(good).tensors.size(), 2u);
}

TEST_F(Safetensors, HeaderLengthHuge) {
  const std::string path = at("huge.safetensors");
  write_bytes(path, le64(9000000000000000000ull) + "{}");
  expect_load_error(path, {"header length: 9000000000000000000 exceeds file size 10"});
  write_bytes(path, le64(~uint64_t(0)) + "{}");
  expect_load_error(path, {"header length: 18446744073709551615"});
}

TEST_F(Safetensors, HeaderLengthBeyondFile) {
  const std::string path = at("long.safetensors");
  write_bytes(path, le64(3) + "{}");
  expect_load_error(path, {"header length: 3 exceeds file size 10"});
  write_bytes(path, "1234567");
  expect_load_error(path, {"file: size 7"});
}

// The header length limit applies even when the file is big enough: a sparse file
// (no disk used) shows that nothing the size of the claimed header is allocated.
TEST_F(Safetensors, HeaderLengthOverLimit) {
  const std::string path = at("sparse.safetensors");
  write_bytes(path, le64(20ull << 20));
  ASSERT_EQ(::truncate(path.c_str(), off_t(8 + (30ll << 20))), 0);
  expect_load_error(path, {"header length: 20971520 exceeds the limit of 8388608"});
}

TEST_F(Safetensors, InvalidJson) {
  expect_load_error(raw("a", R"({"a":)", ""), {"header: invalid JSON", "end of input"});
  expect_load_error(raw("b", "", ""), {"header: invalid JSON"});
  expect_load_error(raw("c", "{\"a\xff\":1}", ""), {"header: invalid JSON", "UTF-8"});
  expect_load_error(raw("d", "{}x", ""), {"header: invalid JSON", "at byte 2"});
  expect_load_error(raw("e", "[]", ""), {"header: expected a JSON object, got array"});
}

TEST_F(Safetensors, WrongDtype) {
  expect_load_error(raw("a", R"({"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", "1234"),
                    {"tensor \"w\": dtype: unsupported dtype BF16 (folio reads F32)"});
  expect_load_error(raw("b", R"({"w":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", "12345678"),
                    {"tensor \"w\": dtype: unknown dtype \"Q7\""});
  expect_load_error(raw("c", R"({"w":{"dtype":32,"shape":[2],"data_offsets":[0,8]}})", "12345678"),
                    {"tensor \"w\": dtype: expected a string"});
}

TEST_F(Safetensors, EntryKeys) {
  expect_load_error(raw("a", R"({"w":{"shape":[2],"data_offsets":[0,8]}})", "12345678"),
                    {"tensor \"w\": dtype: missing"});
  expect_load_error(raw("b", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", "12345678"),
                    {"tensor \"w\": unexpected key \"x\""});
  expect_load_error(raw("c", R"({"w":[1]})", ""), {"tensor \"w\": expected an object"});
  expect_load_error(raw("d", R"({"":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})", "1234"),
                    {"tensor name: empty"});
}

TEST_F(Safetensors, ShapeOffsetSizeMismatch) {
  expect_load_error(raw("a", R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", std::string(20, 'x')),
                    {"tensor \"w\": data_offsets: [0, 20] holds 20 bytes but shape (2, 3) of F32 needs 24"});
}

TEST_F(Safetensors, OffsetsOutOfRange) {
  const std::string data(16, 'x');
  expect_load_error(raw("a", R"({"w":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})", data),
                    {"data_offsets: end 32 exceeds the data section size 16"});
  expect_load_error(raw("b", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", data),
                    {"data_offsets: begin 8 > end 4"});
  expect_load_error(raw("c", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", data),
                    {"data_offsets: begin is -4, must be >= 0"});
  expect_load_error(raw("d", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", data),
                    {"data_offsets: expected [begin, end]"});
  expect_load_error(raw("e", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4.0]}})", data),
                    {"data_offsets: end is 4.0, not an integer"});
  expect_load_error(
      raw("f", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,99999999999999999999]}})", data),
      {"data_offsets: end is 1e+20, not an integer"});
}

// A header of two F32 tensors, each as long as its byte range.
std::string two_f32(const char* a, int a_begin, int a_end, const char* b, int b_begin, int b_end) {
  auto entry = [](const char* name, int begin, int end) {
    return cat("\"", name, "\":{\"dtype\":\"F32\",\"shape\":[", (end - begin) / 4, "],\"data_offsets\":[", begin,
               ",", end, "]}");
  };
  return cat("{", entry(a, a_begin, a_end), ",", entry(b, b_begin, b_end), "}");
}

TEST_F(Safetensors, OverlappingRanges) {
  expect_load_error(raw("a", two_f32("a", 0, 16, "b", 8, 24), std::string(24, 'x')),
                    {"data_offsets: tensor \"b\" [8, 24) overlaps tensor \"a\" [0, 16)"});
  expect_load_error(raw("b", two_f32("a", 0, 8, "b", 0, 8), std::string(8, 'x')), {"overlaps"});
}

TEST_F(Safetensors, GapInData) {
  expect_load_error(raw("a", two_f32("a", 0, 8, "b", 16, 24), std::string(24, 'x')),
                    {"data_offsets: bytes [8, 16) of the data section belong to no tensor", "\"a\"", "\"b\""});
  expect_load_error(raw("b", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, 'x')),
                    {"data_offsets: bytes [0, 4)", "gap before tensor \"a\""});
  expect_load_error(raw("c", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(12, 'x')),
                    {"data section: bytes [8, 12) after the last tensor"});
  expect_load_error(raw("d", "{}", "xyz"), {"data section: bytes [0, 3)"});
}

TEST_F(Safetensors, DuplicateName) {
  expect_load_error(raw("a", two_f32("a", 0, 4, "a", 4, 8), std::string(8, 'x')),
                    {"header: invalid JSON: duplicate key \"a\""});
}

TEST_F(Safetensors, BadMetadata) {
  expect_load_error(raw("a", R"({"__metadata__":{"step":100}})", ""),
                    {"__metadata__: value of \"step\" is 100 (integer), not a string"});
  expect_load_error(raw("b", R"({"__metadata__":{"k":{"x":"y"}}})", ""), {"__metadata__:", "not a string"});
  expect_load_error(raw("c", R"({"__metadata__":["a"]})", ""), {"__metadata__: expected an object, got array"});
}

TEST_F(Safetensors, BadShapes) {
  expect_load_error(raw("a", R"({"w":{"dtype":"F32","shape":[1,1,1,1,1],"data_offsets":[0,4]}})", "1234"),
                    {"tensor \"w\": shape: 5 dimensions, folio tensors have at most 4"});
  expect_load_error(raw("b", R"({"w":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,4]}})", "1234"),
                    {"tensor \"w\": shape: dimension 1 is -3, must be >= 0"});
  expect_load_error(raw("c", R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,4]}})", "1234"),
                    {"shape: dimension 0 is 2.5, not an integer"});
  expect_load_error(raw("d", R"({"w":{"dtype":"F32","shape":"2","data_offsets":[0,4]}})", "1234"),
                    {"shape: expected an array"});
  expect_load_error(
      raw("e", R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", "1234"),
      {"shape: [4294967296,4294967296] has too many"});
  expect_load_error(
      raw("f", R"({"w":{"dtype":"F32","shape":[2305843009213693952],"data_offsets":[0,4]}})", "1234"),
      {"shape:", "too many bytes"});
}

TEST_F(Safetensors, MissingFile) {
  expect_load_error(at("nope.safetensors"), {"file: cannot open: No such file or directory"});
}

TEST_F(Safetensors, DirectoryPath) { expect_load_error(dir_, {"file: is a directory"}); }

TEST_F(Safetensors, FifoIsRefusedWithoutHanging) {
  const std::string path = at("fifo");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  expect_load_error(path, {"file: not a regular file"});
}

}  // namespace
}  // namespace folio
