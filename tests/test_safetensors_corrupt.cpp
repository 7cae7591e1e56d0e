// The safetensors reader against broken files: one clear Error naming the file, never
// a crash, a hang or an allocation the size of what a header claims.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <gtest/gtest.h>

#include "base/error.h"
#include "tests/safetensors_files.h"

namespace folio {
namespace {

using testing::Safetensors;
using testing::le64;

// Every proper prefix of a valid file is refused with an Error, by the header reader
// too: a file cut anywhere in its tensors no longer has the size its header needs.
TEST_F(Safetensors, TruncatedAtEveryLength) {
  const std::string good = at("good.safetensors");
  save_safetensors(good, {{"a", Tensor::ones({2, 3})}, {"b", Tensor::scalar(1)}}, {{"k", "v"}});
  const std::string bytes = testing::slurp(good);
  const std::string path = at("cut.safetensors");
  for (size_t len = 0; len < bytes.size(); ++len) {
    testing::spit(path, bytes.substr(0, len));
    expect_load_error(path, {});
  }
  EXPECT_EQ(load_safetensors(good).tensors.size(), 2u);
  EXPECT_EQ(load_safetensors_metadata(good).metadata, (Metadata{{"k", "v"}}));
}

// The header reader reads the header and nothing after it: the metadata of a file
// whose one tensor claims 4 GiB (sparse: no disk used) comes back at once, with nothing
// allocated for the tensor.
TEST_F(Safetensors, MetadataAloneReadsNoTensor) {
  const std::string path =
      raw("big.safetensors",
          R"({"__metadata__":{"step":"7"},"w":{"dtype":"F32","shape":[1073741824],"data_offsets":[0,4294967296]}})", "");
  ASSERT_EQ(::truncate(path.c_str(), off_t(std::filesystem::file_size(path) + (4ll << 30))), 0);
  const SafetensorsMetadata m = load_safetensors_metadata(path);
  EXPECT_EQ(m.meta("step"), "7");
  EXPECT_EQ(m.path, path);
  testing::expect_error([&] { m.meta("config"); }, {path, "__metadata__: no key \"config\""});
}

TEST_F(Safetensors, HeaderLengthHuge) {
  const std::string path = at("huge.safetensors");
  testing::spit(path, le64(9000000000000000000ull) + "{}");
  expect_load_error(path, {"header length: 9000000000000000000 exceeds file size 10"});
  testing::spit(path, le64(~uint64_t(0)) + "{}");
  expect_load_error(path, {"header length: 18446744073709551615"});
}

TEST_F(Safetensors, HeaderLengthBeyondFile) {
  const std::string path = at("long.safetensors");
  testing::spit(path, le64(3) + "{}");
  expect_load_error(path, {"header length: 3 exceeds file size 10"});
  testing::spit(path, "1234567");
  expect_load_error(path, {"file: size 7"});
}

// The header length limit applies even when the file is big enough: a sparse file
// (no disk used) shows that nothing the size of the claimed header is allocated.
TEST_F(Safetensors, HeaderLengthOverLimit) {
  const std::string path = at("sparse.safetensors");
  testing::spit(path, le64(20ull << 20));
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
