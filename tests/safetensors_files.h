#pragma once
// What the safetensors tests share: a fresh directory per test, files written byte by
// byte (independent of the writer), and the check that a load fails naming the file.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "tests/support.h"

namespace folio::testing {

inline std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = char((n >> (8 * i)) & 0xff);
  return s;
}

// The little-endian bytes of floats, built bit by bit (independent of the writer).
inline std::string f32_bytes(std::initializer_list<float> values) {
  std::string s;
  for (float v : values) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    for (int i = 0; i < 4; ++i) s += char((u >> (8 * i)) & 0xff);
  }
  return s;
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
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
    testing::spit(path, le64(header.size()) + header + data);
    return path;
  }

  // Loading `path` throws an Error naming the path and every fragment; reading its
  // header alone (load_safetensors_metadata) throws the same Error: every problem these
  // files have is the header's, or the header's against the file's size.
  static void expect_load_error(const std::string& path, std::initializer_list<std::string> fragments) {
    const std::string msg = testing::error_of([&] { load_safetensors(path); });
    EXPECT_EQ(msg.rfind("[checkpoint] " + path + ": ", 0), 0u) << msg;
    for (const std::string& frag : fragments) EXPECT_NE(msg.find(frag), std::string::npos) << msg << "\n lacks: " << frag;
    EXPECT_EQ(testing::error_of([&] { load_safetensors_metadata(path); }), msg) << "the header reader disagrees";
  }

  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string dir_;
};

}  // namespace folio::testing
