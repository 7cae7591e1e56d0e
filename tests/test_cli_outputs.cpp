// What the commands write where the user says: a file or directory already there is
// refused (exit 2, naming it and --overwrite) by every command, and left as it was;
// --overwrite replaces it; an output that cannot be written is exit 2 before any work.
#include <gtest/gtest.h>

#include "base/error.h"
#include "support.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using testing::expect_contains;
using testing::Result;
using testing::slurp;
using testing::spit;

class CliOutputs : public testing::CliCorpusTest {
 protected:
  CliOutputs() : CliCorpusTest("cli_outputs", true) {}
  std::string p(const std::string& name) const { return dir_ / name; }
  // Runs `args`, which must be refused with exit 2 naming `path` and --overwrite,
  // with nothing under the test's directory created, changed or removed.
  void expect_refused(const std::string& args, const std::string& path) const {
    const auto before = testing::snapshot(dir_.path);
    const Result r = folio(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    expect_contains(r.err, {path, "--overwrite replaces"});
    EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path)), "") << args;
  }
};

TEST_F(CliOutputs, EveryCommandRefusesToReplaceWhatIsThereUnlessOverwrite) {
  ASSERT_EQ(folio("train --data " + text() + run("run", 2) + " --activation gelu --no-bias --pos rope").code, 0);
  ASSERT_EQ(folio("train --data " + text() + run("other", 2)).code, 0);
  const std::string corpus = slurp(text());
  spit(dir_ / "mine.gguf", "mine");
  fs::create_directories(dir_ / "hf");
  spit(dir_ / "hf/config.json", "{\"mine\": true}");

  expect_refused("export " + p("run") + " " + p("mine.gguf"), p("mine.gguf"));
  expect_refused("export --format hf " + p("run") + " " + p("hf"), p("hf") + ": already holds config.json");
  expect_refused("attention --checkpoint " + p("run") + " --prompt 'To be' --out " + text(), "--out " + text());
  expect_refused("attention --checkpoint " + p("run") + " --prompt 'To be' --format svg --out " + text(), text());
  expect_refused("plot " + p("run") + " --out " + text(), "--out " + text());
  expect_refused("import " + p("other") + " --from " + text(), p("other") + ": already holds model.safetensors");
  // The default --out of plot is a path the user named too, by leaving it.
  spit(dir_ / "loss.svg", "mine");
  const auto before = testing::snapshot(dir_.path);
  const Result plot = testing::run_folio(testing::words("plot " + p("run")), dir_.path, 300, {}, dir_.path);
  EXPECT_EQ(plot.code, 2) << plot.err;
  expect_contains(plot.err, {"--out loss.svg: already exists", "--overwrite"});
  EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path)), "");
  EXPECT_EQ(slurp(text()), corpus);

  // --overwrite replaces each, atomically (no temp file is left beside it).
  const Result gguf = folio("export " + p("run") + " " + p("mine.gguf") + " --overwrite");
  ASSERT_EQ(gguf.code, 0) << gguf.err;
  EXPECT_EQ(slurp(dir_ / "mine.gguf").substr(0, 4), "GGUF");
  const Result att = folio("attention --checkpoint " + p("run") + " --prompt 'To be' --out " + p("att.txt"));
  ASSERT_EQ(att.code, 0) << att.err;
  const Result again = folio("attention --checkpoint " + p("run") + " --prompt 'be' --out " + p("att.txt") + " --overwrite");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(slurp(dir_ / "att.txt").find("To"), std::string::npos);
  EXPECT_EQ(folio("plot " + p("run") + " --out " + p("loss.svg") + " --overwrite").code, 0);
  EXPECT_NE(slurp(dir_ / "loss.svg").find("<svg"), std::string::npos);
  // import --overwrite replaces the whole run: no best weights or state of the old
  // one are left to pair with the new weights.
  const Result gguf2 = folio("export " + p("run") + " " + p("run.gguf"));
  ASSERT_EQ(gguf2.code, 0) << gguf2.err;
  ASSERT_TRUE(fs::exists(dir_ / "other/best.safetensors"));
  const Result imp = folio("import " + p("other") + " --from " + p("run.gguf") + " --overwrite");
  ASSERT_EQ(imp.code, 0) << imp.err;
  EXPECT_TRUE(fs::exists(dir_ / "other/model.safetensors"));
  for (const char* stale : {"best.safetensors", "state.safetensors", "log.csv"})
    EXPECT_FALSE(fs::exists(dir_.path / "other" / stale)) << stale;
  for (const auto& e : fs::directory_iterator(dir_.path))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

// An output in a directory that is not there, or cannot take files, is bad input
// found before the work: exit 2 naming it, as for every other command.
TEST_F(CliOutputs, AnOutputThatCannotBeWrittenIsExitTwo) {
  ASSERT_EQ(folio("train --data " + text() + run("run", 2) + " --activation gelu --no-bias --pos rope").code, 0);
  for (const std::string& out : {p("nope/m.gguf"), std::string("/proc/folio.gguf"), p("run")}) {
    const Result r = folio("export " + p("run") + " " + out);
    EXPECT_EQ(r.code, 2) << out << "\n" << r.err;
    expect_contains(r.err, {out});
  }
  spit(dir_ / "file", "x");
  for (const std::string& out : {std::string("/proc/folio-hf"), p("file"), p("file/hf")}) {
    const Result r = folio("export --format hf " + p("run") + " " + out);
    EXPECT_EQ(r.code, 2) << out << "\n" << r.err;
    expect_contains(r.err, {out});
  }
}

}  // namespace
}  // namespace folio
