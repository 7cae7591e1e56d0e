// folio tokenize through the binary: where it may write.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "io/json.h"
#include "tests/support.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using testing::expect_contains;
using testing::Result;

class CliTokenize : public ::testing::Test {
 protected:
  void SetUp() override { testing::write_small_corpus(dir_.path / "text.txt", 30000); }
  Result folio(const std::string& args) const { return testing::run_folio(testing::words(args), dir_.path); }
  std::string text() const { return dir_ / "text.txt"; }
  testing::TempDir dir_{"cli_tokenize"};
};

// --overwrite replaces a token directory; a folder of anything else (runs, notes) is
// refused before a byte is written, naming the folder and what it holds.
TEST_F(CliTokenize, OverwriteNeverWritesIntoAFolderOfOtherFiles) {
  for (int i = 1; i <= 4; ++i) {
    fs::create_directories(dir_.path / "runs" / ("run" + std::to_string(i)));
    testing::spit(dir_.path / "runs" / ("run" + std::to_string(i)) / "log.csv", "step\n");
  }
  fs::create_directories(dir_.path / "notes");
  testing::spit(dir_.path / "notes" / "notes.txt", "mine");
  for (const std::string overwrite : {"", " --overwrite"})
    for (const std::string out : {"runs", "notes"}) {
      const testing::Snapshot before = testing::snapshot(dir_.path / out);
      const Result r = folio("tokenize " + text() + " --tokenizer char --out " + (dir_ / out) + overwrite);
      EXPECT_EQ(r.code, 2) << out << overwrite << "\n" << r.err;
      expect_contains(r.err, {"--out " + (dir_ / out), "is not a token directory",
                              out == "runs" ? "4 entries of its own (run1/, run2/, run3/, run4/)"
                                            : "1 entry of its own (notes.txt)"});
      EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path / out)), "") << out << overwrite;
    }
  // A token directory is replaced with --overwrite, and only with it.
  ASSERT_EQ(folio("tokenize " + text() + " --tokenizer char --out " + (dir_ / "tok")).code, 0);
  const Result again = folio("tokenize " + text() + " --tokenizer char --out " + (dir_ / "tok"));
  EXPECT_EQ(again.code, 2);
  expect_contains(again.err, {"already holds a token directory", "--overwrite"});
  const Result replaced = folio("tokenize " + text() + " --tokenizer char --val-fraction 0.2 --overwrite --out " +
                                (dir_ / "tok"));
  EXPECT_EQ(replaced.code, 0) << replaced.err;
}

// --include 'a/**/*.h' takes the headers at any depth below a/, a/ itself included.
TEST_F(CliTokenize, DoubleStarMatchesAnyDepth) {
  int expected = 0;
  for (const std::string sub : {"", "b/", "b/c/", "b/c/d/"})
    for (int i = 0; i < 6; ++i) {
      fs::create_directories(dir_.path / "tree" / "a" / sub);
      const std::string n = std::to_string(i);
      testing::spit(dir_.path / "tree" / ("a/" + sub + "h" + n + ".h"), "int x" + n + ";\n");
      testing::spit(dir_.path / "tree" / ("a/" + sub + "c" + n + ".c"), "int y;\n");
      ++expected;
    }
  fs::create_directories(dir_.path / "tree" / "z");
  testing::spit(dir_.path / "tree" / "z" / "other.h", "int z;\n");
  const Result r = folio("tokenize " + (dir_ / "tree") +
                         " --include 'a/**/*.h' --tokenizer char --val-fraction 0.5 --out " + (dir_ / "tok"));
  ASSERT_EQ(r.code, 0) << r.err;
  const Json m = Json::parse(testing::slurp(dir_.path / "tok" / "manifest.json"));
  const Json& splits = *m.find("splits");
  EXPECT_EQ(splits.find("train")->find("documents")->as_int() + splits.find("val")->find("documents")->as_int(), expected);
}

}  // namespace
}  // namespace folio
