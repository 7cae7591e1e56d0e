// folio train's data through the binary, as a user's second hour meets it: a folder
// of text, bytes that are not UTF-8.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/support.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using testing::expect_contains;
using testing::Result;

class CliData : public ::testing::Test {
 protected:
  void SetUp() override { testing::write_small_corpus(dir_.path / "text.txt", 30000); }
  Result folio(const std::string& args) const { return testing::run_folio(testing::words(args), dir_.path); }
  std::string text() const { return dir_ / "text.txt"; }
  // A short run into `out`; a small model unless it starts --init-from one.
  std::string run(const std::string& out, int iters, bool small = true) const {
    return (small ? " --n-layer 1 --n-head 2 --n-embd 32 --block-size 32" : "") + std::string(" --out ") + (dir_ / out) +
           " --batch-size 8 --eval-interval 10 --eval-iters 2 --warmup-iters 2 --threads 2 --quiet --max-iters " +
           std::to_string(iters);
  }
  testing::TempDir dir_{"cli_data"};
};

// A folder of text files is not a token directory: the refusal says how to make one.
TEST_F(CliData, AFolderOfTextSuggestsTokenize) {
  fs::create_directories(dir_.path / "texts");
  testing::spit(dir_.path / "texts" / "a.txt", "some text\n");
  const Result r = folio("train --data " + (dir_ / "texts") + run("r", 5));
  EXPECT_EQ(r.code, 2);
  expect_contains(r.err, {"not a token directory", "folio tokenize " + (dir_ / "texts") + " --out DATA_DIR",
                          "folio train --data DATA_DIR"});
}

// Bytes that are not UTF-8 are read as U+FFFD, as folio tokenize reads them, and counted.
TEST_F(CliData, InvalidUtf8IsReplacedAndCounted) {
  std::string bad = testing::slurp(text());
  bad[100] = '\xff', bad[2000] = '\xe9', bad[29000] = '\xc3';  // a Latin-1 byte, a cut-off sequence
  testing::spit(dir_.path / "bad.txt", bad);
  const Result r = folio("train --data " + (dir_ / "bad.txt") + run("r", 2));
  EXPECT_EQ(r.code, 0) << r.err;
  expect_contains(r.err, {"bad.txt: not valid UTF-8; 3 bytes replaced by U+FFFD"});
  const Result clean = folio("train --data " + text() + run("clean", 2));
  EXPECT_EQ(clean.code, 0);
  EXPECT_EQ(clean.err.find("UTF-8"), std::string::npos) << clean.err;
}

}  // namespace
}  // namespace folio
