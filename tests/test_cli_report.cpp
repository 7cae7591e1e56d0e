// folio report and folio train --report: the report card renders as markdown a reader
// can follow (tests/check_report.py: its sections, relative links that resolve, SVGs
// that parse, closed code blocks, whole tables), says what the run was, and bad input
// is refused with exit 2 and nothing written.
#include <gtest/gtest.h>

#include <cstdlib>

#include "support.h"

namespace folio {
namespace {

using testing::expect_contains;
using testing::Result;
using testing::slurp;
using testing::spit;

class CliReport : public testing::CliCorpusTest {
 protected:
  // tests/check_report.py's verdict on RUN/report.md (skipped without python3).
  void expect_renders(const std::string& report) const {
    if (std::system("/usr/bin/python3 -c '' 2>/dev/null") != 0) GTEST_SKIP() << "no /usr/bin/python3";
    const std::string cmd = "/usr/bin/python3 '" FOLIO_SOURCE_DIR "/tests/check_report.py' '" + report + "' >'" +
                            (dir_ / "check.txt") + "' 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << slurp(dir_ / "check.txt");
  }
};

TEST_F(CliReport, TrainWritesAReportThatRendersAndReportRewritesIt) {
  const std::string item = R"({"context": "To be, or not", "choices": ["to be", "the king"], "answer": 0})" "\n";
  spit(dir_ / "choice.jsonl", item + item);
  spit(dir_ / "gen.jsonl", R"({"prompt": "To be", "answer": "x"})" "\n");
  const Result r = folio("train --data " + text() + run("run", 20) + " --eval-task " + (dir_ / "choice.jsonl") +
                         " --report");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string report = dir_ / "run/report.md";
  const std::string md = slurp(report);
  expect_contains(md, {"```sh\nfolio train --", " --data " + text(), " --report", "## Machine", "| CPU |", "AVX2", "| dtype | fp32 |",
                       "char", "tokens trained on", "val bits per byte", "![train and val loss](report-loss.svg)",
                       "![choice during training](report-task-choice.svg)", "| choice | ", " at step 20 |",
                       "Greedy, at most 80 tokens"});
  expect_renders(report);

  // Refused while report.md is there, unless --overwrite; then with a task scored now.
  const std::string again = "report --checkpoint " + (dir_ / "run") + " --task " + (dir_ / "gen.jsonl") +
                            " --prompt To --threads 2";
  const Result kept = folio(again);
  EXPECT_EQ(kept.code, 2);
  expect_contains(kept.err, {"report.md", "--overwrite"});
  EXPECT_EQ(slurp(report), md);
  const Result rewritten = folio(again + " --overwrite");
  ASSERT_EQ(rewritten.code, 0) << rewritten.err;
  expect_contains(slurp(report), {"Scored on the final weights (step 20)", "| gen | prompt | 1 | exact_match |",
                                  "```\nTo"});
  expect_renders(report);
}

// The figures beside report.md are the user's as much as report.md is: without
// --overwrite each one already there is refused, named, and nothing is written. Only
// report.md was checked once, and report-loss.svg and report-task-*.svg were replaced.
TEST_F(CliReport, RefusesToReplaceAnyOfItsFilesWithoutOverwrite) {
  spit(dir_ / "choice.jsonl", R"({"context": "To be, or not", "choices": ["to be", "the king"], "answer": 0})" "\n");
  ASSERT_EQ(folio("train --data " + text() + run("run", 10) + " --eval-task " + (dir_ / "choice.jsonl")).code, 0);
  const std::string report = "report --checkpoint " + (dir_ / "run");
  for (const std::string kept : {"report-loss.svg", "report-task-choice.svg"}) {
    SCOPED_TRACE(kept);
    for (const char* f : {"report.md", "report-loss.svg", "report-task-choice.svg"}) std::filesystem::remove(dir_ / (std::string("run/") + f));
    spit(dir_ / ("run/" + kept), "the user's own\n");
    const auto before = testing::snapshot(dir_.path);
    const Result r = folio(report);
    EXPECT_EQ(r.code, 2) << r.err;
    expect_contains(r.err, {"run: already holds " + kept + "; --overwrite replaces it"});
    EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path)), "");
    EXPECT_EQ(slurp(dir_ / ("run/" + kept)), "the user's own\n");
  }
  const Result replaced = folio(report + " --overwrite");
  ASSERT_EQ(replaced.code, 0) << replaced.err;
  expect_contains(slurp(dir_ / "run/report-task-choice.svg"), {"<svg"});
}

// The run is named by its directory however the path to it is written: "runs/x/" (a
// shell's completion) and "." (from inside it) once gave the report an empty title and
// its loss plot a legend of ": best val" and ".: best val".
TEST_F(CliReport, NamesTheRunWhateverThePathLooksLike) {
  ASSERT_EQ(folio("train --data " + text() + run("run", 10)).code, 0);
  const std::string dir = dir_ / "run";
  for (const auto& [checkpoint, cwd] : {std::pair<std::string, std::string>{dir + "/", ""}, {".", dir}, {"../run/", dir}}) {
    SCOPED_TRACE(checkpoint);
    const Result r =
        testing::run_folio(testing::words("report --overwrite --checkpoint " + checkpoint), dir_.path, 300, {}, cwd);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(slurp(dir + "/report.md").rfind("# Report: run\n", 0), 0u) << slurp(dir + "/report.md").substr(0, 80);
    expect_contains(slurp(dir + "/report-loss.svg"), {">run: best val", "elapsed wall time of run below"});
  }
}

TEST_F(CliReport, BadInputIsRefusedWithNothingWritten) {
  ASSERT_EQ(folio("train --data " + text() + run("run", 10)).code, 0);
  std::filesystem::create_directories(dir_ / "empty");
  std::filesystem::create_directories(dir_ / "weights");  // as folio import writes a model
  std::filesystem::copy_file(dir_ / "run/model.safetensors", dir_ / "weights/model.safetensors");
  spit(dir_ / "bad.jsonl", "{\"context\": \"a\"}\n");
  const auto before = testing::snapshot(dir_.path);
  const std::vector<std::pair<std::string, std::string>> cases = {
           {"report --checkpoint " + (dir_ / "none"), "expected a run directory"},
           {"report --checkpoint " + (dir_ / "run/model.safetensors"), "expected a run directory"},
           {"report --checkpoint " + (dir_ / "empty"), "has no model.safetensors, log.csv or state.safetensors"},
           {"report --checkpoint " + (dir_ / "weights"),
            "weights has no log.csv or state.safetensors: a report reads a run's weights, log and state, as folio train "
            "--out writes them; weights alone (a model folio import wrote) are trained into a run first: folio train "
            "--init-from "},
           {"report --checkpoint " + (dir_ / "run") + " --task " + (dir_ / "bad.jsonl"), "bad.jsonl:1: "},
           {"report --checkpoint " + (dir_ / "run") + " --sample-tokens 0", "--sample-tokens must be in [1, 4096], got 0"},
           // Unbounded, this ran for days (a forward pass a token) and wrote nothing.
           {"report --checkpoint " + (dir_ / "run") + " --sample-tokens 1000000000000",
            "--sample-tokens must be in [1, 4096], got 1000000000000"},
           {"report --checkpoint " + (dir_ / "run") + " --prompt h\xC3\xA9", "--prompt h\xC3\xA9: [tokenizer] character"},
           {"report", "--checkpoint"}};
  for (const auto& [args, what] : cases) {
    const Result r = folio(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    expect_contains(r.err, {std::string(what)});
  }
  EXPECT_EQ(testing::diff(before, testing::snapshot(dir_.path)), "");
}

}  // namespace
}  // namespace folio
