// What every command accepts of two inputs that crashed or misled before: a thread
// count (one range for every command, as the Python module's), and a --data file that
// is mostly not UTF-8 (refused, not trained on with a warning).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "autograd/parallel.h"
#include "base/rng.h"
#include "tests/support.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using testing::Result;

using CliLimits = testing::CliCorpusTest;

// 65,536 threads crashed the OpenMP runtime (SIGSEGV) and 40,000 failed in its thread
// creation: every command refuses what is outside [0, kMaxThreads], before it runs,
// and runs at the limit itself.
TEST_F(CliLimits, ThreadsOutsideOneRangeAreRefusedByEveryCommand) {
  ASSERT_EQ(folio("train --data " + text() + run("run", 2)).code, 0);
  const std::string run_dir = (dir_ / "run");
  const std::string range = "--threads must be in [0, " + std::to_string(kMaxThreads) + "]";
  for (const std::string& command : std::vector<std::string>{
           "train --data " + text() + run("other", 2), "eval --checkpoint " + run_dir,
        "generate --checkpoint " + run_dir + " --max-new-tokens 2", "gradcheck --op add",
        "attention --checkpoint " + run_dir + " --prompt abc"}) {
    for (const char* threads : {" --threads 65536", " --threads 100000", " --threads 1025", " --threads -1"}) {
      const Result r = folio(command + threads);
      EXPECT_EQ(r.code, 2) << command << threads << "\n" << r.err;
      EXPECT_NE(r.err.find(range), std::string::npos) << command << threads << ": " << r.err;
    }
  }
  EXPECT_FALSE(fs::exists(dir_ / "other"));
  // A recipe's value has the same range.
  testing::spit(dir_ / "threads.ini", "threads = 5000\n");
  const Result recipe = folio("train --config " + (dir_ / "threads.ini") + " --data " + text() + " --out " +
                              (dir_ / "other") + " --n-layer 1 --n-embd 16 --block-size 8 --max-iters 2");
  EXPECT_EQ(recipe.code, 2) << recipe.err;
  EXPECT_NE(recipe.err.find("5000"), std::string::npos) << recipe.err;
  // The limit itself runs (threads beyond the cores wait for each other, with a warning).
  const Result most = folio("eval --checkpoint " + run_dir + " --max-windows 2 --threads " + std::to_string(kMaxThreads));
  EXPECT_EQ(most.code, 0) << most.err;
}

// Random bytes are ~43 % invalid UTF-8: not a text to train on, refused (exit 2) with
// the fraction, by train and by eval. A few Latin-1 bytes in a text still train, with
// a warning.
TEST_F(CliLimits, AFileMostlyNotUtf8IsRefusedWithItsFraction) {
  std::string noise(20000, '\0');
  Rng rng(7);
  for (char& c : noise) c = char(1 + rng.next_u64() % 255);  // no NUL: not caught as binary by a NUL
  testing::spit(dir_ / "noise.bin", noise);
  const Result t = folio("train --data " + (dir_ / "noise.bin") + run("noise", 2));
  EXPECT_EQ(t.code, 2) << t.err;
  testing::expect_contains(t.err, {"noise.bin", "are not valid UTF-8, more than the 10 %"});
  EXPECT_FALSE(fs::exists(dir_ / "noise"));

  ASSERT_EQ(folio("train --data " + text() + run("run", 2)).code, 0);
  const Result e = folio("eval --checkpoint " + (dir_ / "run") + " --data " + (dir_ / "noise.bin"));
  EXPECT_EQ(e.code, 2) << e.err;
  testing::expect_contains(e.err, {"noise.bin", " %) are not valid UTF-8"});

  std::string latin1 = testing::slurp(text());
  latin1[100] = char(0xe9), latin1[5000] = char(0xe8);  // é and è as Latin-1 bytes
  testing::spit(dir_ / "latin1.txt", latin1);
  const Result l = folio("train --data " + (dir_ / "latin1.txt") + run("latin1", 2));
  EXPECT_EQ(l.code, 0) << l.err;
  testing::expect_contains(l.err, {"latin1.txt: not valid UTF-8; 2 bytes replaced by U+FFFD"});
}

}  // namespace
}  // namespace folio
