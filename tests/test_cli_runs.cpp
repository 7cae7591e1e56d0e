// A run directory through the folio binary, as a newcomer meets it: a run is never
// replaced without being asked, --resume accepts what did not change, finds its text
// from anywhere, keeps its schedule and says what it does, and the log stays in step
// with the checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <thread>

#include "io/checkpoint.h"
#include "io/json.h"
#include "io/run_dir.h"
#include "io/safetensors.h"
#include "tests/support.h"
#include "train/run_state.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using testing::Result;

class CliRuns : public ::testing::Test {
 protected:
  Result folio(const std::string& args, const fs::path& cwd_files = {}) const {
    return testing::run_folio(testing::words(args), cwd_files.empty() ? dir_.path : cwd_files);
  }
  std::string train(int64_t iters, const std::string& out) const {
    return "train --data " + corpus_ + " --out " + out +
           " --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-interval 10 --eval-iters 1"
           " --warmup-iters 2 --threads 1 --max-iters " + std::to_string(iters);
  }
  // The log.csv rows of `run`, without the header.
  static std::vector<std::string> rows(const std::string& run) {
    std::ifstream in(run + "/log.csv");
    std::vector<std::string> out;
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) out.push_back(line);
    return out;
  }
  static double cell(const std::string& row, int i) {
    std::stringstream s(row);
    std::string c;
    for (int k = 0; k <= i; ++k) std::getline(s, c, ',');
    return std::stod(c);
  }
  testing::TempDir dir_{"cli_runs"};
  std::string corpus_ = testing::write_small_corpus(dir_.path / "corpus.txt");
  std::string run_ = dir_ / "run";
};

// A second `folio train --out RUN` without --resume refuses, names --resume and
// --overwrite, and leaves the run as it was; --overwrite replaces it.
TEST_F(CliRuns, AnExistingRunIsNeverReplacedUnasked) {
  ASSERT_EQ(folio(train(20, run_) + " --quiet").code, 0);
  const testing::Snapshot before = testing::snapshot(run_);
  const Result again = folio(train(10, run_));
  EXPECT_EQ(again.code, 2);
  testing::expect_contains(again.err, {"--out " + run_ + " already holds a run", "--resume", "--overwrite"});
  EXPECT_EQ(testing::diff(before, testing::snapshot(run_)), "");
  EXPECT_EQ(folio(train(10, run_) + " --resume --overwrite").code, 2);
  const Result over = folio(train(10, run_) + " --overwrite --quiet");
  ASSERT_EQ(over.code, 0) << over.err;
  EXPECT_EQ(load_model(run_).step, 10);
  EXPECT_EQ(rows(run_).size(), 2u);  // steps 0 and 10: the old log went with the old run
}

// folio info and folio tokens read the headers alone, and so does --resume for its
// options: a run whose weights and optimizer moments hold NaN (what only a reading of
// the tensors sees) shows every line as before, and tokenizes; resuming it is refused
// where the trainer reads the tensors, naming the file.
TEST_F(CliRuns, InfoAndTokensReadTheHeadersAlone) {
  ASSERT_EQ(folio(train(10, run_) + " --quiet").code, 0);
  const Result before = folio("info --checkpoint " + run_);
  ASSERT_EQ(before.code, 0) << before.err;
  for (const std::string& file : {run_ + "/model.safetensors", run_ + "/state.safetensors"}) {
    SafetensorsFile f = load_safetensors(file);
    for (NamedTensor& t : f.tensors) t.tensor.data()[0] = std::numeric_limits<float>::quiet_NaN();
    save_safetensors(file, f.tensors, f.metadata);
  }
  const Result after = folio("info --checkpoint " + run_);
  ASSERT_EQ(after.code, 0) << after.err;
  EXPECT_EQ(after.out, before.out);
  const Result tokens = folio("tokens --checkpoint " + run_ + " --text First");
  EXPECT_EQ(tokens.code, 0) << tokens.err;
  const Result resume = folio(train(20, run_) + " --resume");
  EXPECT_EQ(resume.code, 2);
  testing::expect_contains(resume.err, {".safetensors", "nan"});
}

// --resume with the model's flags repeated at their values passes; a real change is
// refused, naming the flag.
TEST_F(CliRuns, ResumeAcceptsFixedOptionsThatDidNotChange) {
  ASSERT_EQ(folio(train(10, run_) + " --quiet").code, 0);
  const Result same = folio(train(20, run_) + " --resume --quiet");  // every model flag, at the run's values
  ASSERT_EQ(same.code, 0) << same.err;
  EXPECT_EQ(load_model(run_).step, 20);
  const Result changed = folio(train(30, run_) + " --resume --n-layer 2");
  EXPECT_EQ(changed.code, 2);
  testing::expect_contains(changed.err, {"--n-layer cannot change when resuming"});
  EXPECT_EQ(folio(train(30, run_) + " --resume --seed 7").code, 2);
}

// The run keeps --data as an absolute path: --resume from another directory finds
// the text, and says which it uses, from which step.
TEST_F(CliRuns, ResumeFromAnotherDirectoryFindsTheText) {
  fs::create_directories(dir_.path / "elsewhere");
  testing::spit(dir_.path / "work_corpus.txt", testing::slurp(corpus_));
  const Result t = testing::run_folio(
      {"train", "--data", "work_corpus.txt", "--out", run_, "--n-layer", "1", "--n-head", "2", "--n-embd", "16",
       "--block-size", "16", "--max-iters", "4", "--eval-iters", "1", "--quiet"},
      dir_.path, 300, {}, dir_.path);
  ASSERT_EQ(t.code, 0) << t.err;
  const Result r = testing::run_folio({"train", "--out", run_, "--resume", "--max-iters", "6"}, dir_.path, 300, {},
                                      dir_.path / "elsewhere");
  ASSERT_EQ(r.code, 0) << r.err;
  testing::expect_contains(r.out, {"resuming " + run_ + " from step 4 (of 6) on " + (dir_ / "work_corpus.txt")});
  testing::expect_contains(folio("info --checkpoint " + run_).out, {"--data " + (dir_ / "work_corpus.txt")});
}

// A longer run keeps its cosine (the lr goes on from where it was, not from a restart
// near the peak) and says so; a change of the learning rate at the resumed step is
// one warning. A run already at its --max-iters has nothing left to do.
TEST_F(CliRuns, ResumeKeepsTheScheduleOrSaysWhatChanges) {
  ASSERT_EQ(folio(train(20, run_) + " --quiet").code, 0);
  const Result longer = folio("train --out " + run_ + " --resume --max-iters 40");
  ASSERT_EQ(longer.code, 0) << longer.err;
  testing::expect_contains(longer.out, {"resuming " + run_ + " from step 20 (of 40)", "keeps the run's horizon of 20"});
  EXPECT_EQ(longer.err, "");
  for (const std::string& row : rows(run_))
    if (cell(row, 0) > 20) {
      EXPECT_LE(cell(row, 3), 1e-4 + 1e-9) << row << " (the lr after step 20)";
    }

  const Result stretched = folio("train --out " + run_ + " --resume --max-iters 60 --lr-decay-iters 100 --quiet");
  ASSERT_EQ(stretched.code, 0) << stretched.err;
  testing::expect_contains(stretched.err, {"warning: the learning rate at step 40 changes from 0.0001 to "});

  const testing::Snapshot before = testing::snapshot(run_);
  const Result done = folio("train --out " + run_ + " --resume --max-iters 50");
  EXPECT_EQ(done.code, 0) << done.err;
  testing::expect_contains(done.out, {"is at step 60", "nothing left to do"});
  EXPECT_EQ(testing::diff(before, testing::snapshot(run_)), "");
}

// The log's wall time goes on across resumes (the plot's time axis and "N steps in
// T"), and a log row past the checkpoint (a process killed between its log row and
// its save) is dropped on resume instead of appearing twice.
TEST_F(CliRuns, LogStaysInStepWithTheCheckpointAcrossResumes) {
  ASSERT_EQ(folio(train(20, run_) + " --quiet").code, 0);
  // As if the first process had run for 1000 s, then was killed after logging step 30
  // but before saving it.
  std::string log = testing::slurp(run_ + "/log.csv");
  const std::string step20 = rows(run_)[2];
  std::string slow = step20;
  for (int comma = 0, i = 0; i < int(slow.size()); ++i)
    if (slow[i] == ',' && ++comma == 5) slow = slow.substr(0, i + 1) + "1000" + slow.substr(slow.find(',', i + 1));
  log.replace(log.find(step20), step20.size(), slow);
  testing::spit(run_ + "/log.csv", log + "30,3.5,3.6,0.0001,1000,5000,5.2,1\n");
  ASSERT_EQ(folio("train --out " + run_ + " --resume --max-iters 30 --quiet").code, 0);
  const std::vector<std::string> r = rows(run_);
  ASSERT_EQ(r.size(), 4u) << testing::slurp(run_ + "/log.csv");
  for (size_t i = 0; i < r.size(); ++i) EXPECT_EQ(int64_t(cell(r[i], 0)), int64_t(i) * 10) << r[i];
  // elapsed_s goes on from the first process's 1000 s, not from the dropped row's 5000:
  // at least 1000 (the log writes six digits, so the resumed steps' few milliseconds may
  // not show), and below 5000.
  EXPECT_GE(cell(r[3], 5), 1000.0) << r[3];
  EXPECT_LT(cell(r[3], 5), 5000.0) << r[3];
}

// A run resumes on the threads it trained on: 30 steps with --threads 1, then --resume
// to 60 without --threads, end with the weights of 60 straight steps. On all cores each
// batch would be cut into as many shards, and the gradient summed in another order.
TEST_F(CliRuns, ResumeRunsOnTheThreadsOfTheRun) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: all cores is one thread too";
  const std::string straight = dir_ / "straight";
  ASSERT_EQ(folio(train(60, straight) + " --lr-decay-iters 60 --quiet").code, 0);  // one cosine for both
  ASSERT_EQ(folio(train(30, run_) + " --lr-decay-iters 60 --quiet").code, 0);
  const Result resumed = folio("train --out " + run_ + " --resume --max-iters 60");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(resumed.out.find("threads"), std::string::npos) << resumed.out;  // no note: the machine has them
  EXPECT_TRUE(testing::slurp(run_ + "/model.safetensors") == testing::slurp(straight + "/model.safetensors"));
  EXPECT_EQ(saved_run(run_).config.threads, 1);
}

// The train_config of `run`'s state with `edit` applied to its JSON object.
void edit_saved_options(const std::string& run, const std::function<void(Json::Object&)>& edit) {
  SafetensorsFile f = load_safetensors(run + "/state.safetensors");
  for (auto& [key, value] : f.metadata)
    if (key == "train_config") {
      Json::Object o = Json::parse(value).as_object();
      edit(o);
      value = Json(o).dump();
    }
  save_safetensors(run + "/state.safetensors", f.tensors, f.metadata);
}

// A run saved before the thread count was resumes on this process's threads, and saves
// them from then on; a run saved with more threads than this machine has cores resumes
// on them, and says what that costs.
TEST_F(CliRuns, ResumeOfARunWithoutItsThreadsOrWithMoreThanTheCores) {
  ASSERT_EQ(folio(train(10, run_) + " --quiet").code, 0);
  edit_saved_options(run_, [](Json::Object& o) { std::erase_if(o, [](const auto& kv) { return kv.first == "threads"; }); });
  ASSERT_EQ(saved_run(run_).config.threads, 0);
  const Result old = folio("train --out " + run_ + " --resume --max-iters 12");
  ASSERT_EQ(old.code, 0) << old.err;
  EXPECT_EQ(old.out.find("threads"), std::string::npos) << old.out;
  EXPECT_GE(saved_run(run_).config.threads, 1);

  const int64_t more = int64_t(std::thread::hardware_concurrency()) + 1;
  edit_saved_options(run_, [&](Json::Object& o) {
    for (auto& [key, value] : o)
      if (key == "threads") value = Json(more);
  });
  const Result r = folio("train --out " + run_ + " --resume --max-iters 14");
  ASSERT_EQ(r.code, 0) << r.err;
  testing::expect_contains(r.out, {"the run trained on " + std::to_string(more) + " threads and resumes on them",
                                   "this machine has " + std::to_string(more - 1) + " core"});
  EXPECT_EQ(saved_run(run_).config.threads, more);
  const Result given = folio("train --out " + run_ + " --resume --max-iters 15 --threads 1");
  ASSERT_EQ(given.code, 0) << given.err;
  EXPECT_EQ(given.out.find("resumes on them"), std::string::npos) << given.out;
  EXPECT_EQ(saved_run(run_).config.threads, 1);
}

// The recipe a run came from is saved with it, and a resume keeps saying so.
TEST_F(CliRuns, ResumeKeepsTheRecipeOfTheRun) {
  const std::string recipe = dir_ / "recipe.ini";
  std::ofstream(recipe) << "n-layer = 1\nn-head = 2\nn-embd = 16\nblock-size = 16\neval-iters = 1\n";
  const Result t = folio("train --config " + recipe + " --data " + corpus_ + " --out " + run_ + " --max-iters 2 --quiet");
  ASSERT_EQ(t.code, 0) << t.err;
  ASSERT_EQ(folio("train --out " + run_ + " --resume --max-iters 4 --quiet").code, 0);
  const Result info = folio("info --checkpoint " + run_);
  testing::expect_contains(info.out, {"recipe       --config " + recipe, "step         4"});
}

// An output directory that cannot be written is bad input (exit 2, before anything
// starts), whatever makes it so.
TEST_F(CliRuns, AnUnusableOutIsExitTwo) {
  testing::spit(dir_.path / "file", "x");
  for (const auto& [out, fragment] : std::vector<std::pair<std::string, std::string>>{
           {"/proc/folio-nope", "/proc"},
           {"/proc/folio-nope/run", "/proc"},
           {dir_ / "file", "not a directory"},
           {dir_ / "file/run", "not a directory"}}) {
    const Result r = folio(train(2, out));
    EXPECT_EQ(r.code, 2) << out << "\n" << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << out << ": " << r.err;
  }
}

// Settings that work but make no sense are said, once.
TEST_F(CliRuns, WarmupLongerThanTheRunWarns) {
  const Result r = folio(train(4, run_) + " --warmup-iters 10 --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  testing::expect_contains(r.err, {"warning: --warmup-iters 10 is not shorter than the run (--max-iters 4)"});
}

// The default warm-up fits a short run (a tenth of it, here 3 steps), so it warns of
// nothing; warnings come only for a run that starts, not before an error.
TEST_F(CliRuns, TheDefaultWarmupFitsAShortRunAndWarningsWaitForTheStart) {
  const std::string no_warmup = "train --data " + corpus_ + " --out " + run_ +
                                " --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 1"
                                " --threads 1 --max-iters 30 --quiet";
  const Result r = folio(no_warmup);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  testing::expect_contains(folio("info --checkpoint " + run_).out, {"--warmup-iters 3 "});
  const Result bad = folio("train --data " + (dir_ / "missing.txt") + " --out " + (dir_ / "other") +
                           " --max-iters 4 --warmup-iters 10 --seq-warmup 10 --block-size 8");
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err.find("warning"), std::string::npos) << bad.err;
}

// The first evaluation, before any step, says it has begun (on a large vocabulary it
// takes a while); --quiet keeps it quiet.
TEST_F(CliRuns, TheFirstEvaluationSaysItHasBegun) {
  const Result r = folio(train(3, run_));
  ASSERT_EQ(r.code, 0) << r.err;
  testing::expect_contains(r.err, {"evaluating step 0 on 2 batches (train and val)..."});
  EXPECT_EQ(r.err.find("evaluating step 3"), std::string::npos) << r.err;
  const Result quiet = folio(train(3, run_) + " --overwrite --quiet");
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
}

// Step 0's evaluation is a candidate for best like any other: a fine-tune that only
// makes the model worse keeps the weights it started from as best.safetensors, and
// folio info's best val is the log's lowest (the one folio plot names), shown with
// best.safetensors' step.
TEST_F(CliRuns, StepZeroCanBeTheBest) {
  ASSERT_EQ(folio(train(30, run_) + " --quiet").code, 0);
  const std::string tuned = dir_ / "tuned";
  const Result t = folio("train --init-from " + run_ + " --data " + corpus_ + " --out " + tuned +
                         " --max-iters 5 --eval-interval 5 --eval-iters 4 --lr 0.3 --threads 1 --quiet");
  ASSERT_EQ(t.code, 0) << t.err;
  const std::vector<std::string> log = rows(tuned);
  ASSERT_EQ(log.size(), 2u) << testing::slurp(tuned + "/log.csv");
  double lowest = cell(log[0], 2);
  for (const std::string& row : log) lowest = std::min(lowest, cell(row, 2));
  ASSERT_EQ(lowest, cell(log[0], 2)) << "the fine-tune did not make the model worse: " << testing::slurp(tuned + "/log.csv");
  EXPECT_EQ(load_model(tuned + "/best.safetensors").step, 0);
  char best[32], best_file[64];
  std::snprintf(best, sizeof best, "best val     %.4f", lowest);
  std::snprintf(best_file, sizeof best_file, "best         step 0, val loss %.4f (", lowest);
  testing::expect_contains(folio("info --checkpoint " + tuned).out, {best, best_file + tuned + "/best.safetensors)\n"});
}

// folio info on a run shows best.safetensors' step; a damaged one is a warning naming
// it, and the rest is shown; none (a run directory copied without it) is nothing at all.
TEST_F(CliRuns, InfoShowsTheBestCheckpointIfReadable) {
  ASSERT_EQ(folio(train(10, run_) + " --quiet").code, 0);
  const std::string best = run_ + "/best.safetensors";
  const Result info = folio("info --checkpoint " + run_);
  ASSERT_EQ(info.code, 0) << info.err;
  testing::expect_contains(info.out, {"best         step " + std::to_string(load_model(best).step) + ", val loss "});
  EXPECT_EQ(info.err, "");
  testing::spit(best, testing::slurp(best).substr(0, 100));  // cut short
  const Result damaged = folio("info --checkpoint " + run_);
  EXPECT_EQ(damaged.code, 0) << damaged.err;
  testing::expect_contains(damaged.out, {"step         10", "best val     "});
  EXPECT_EQ(damaged.out.find("best         "), std::string::npos) << damaged.out;
  testing::expect_contains(damaged.err, {"warning: " + best + " cannot be read, so the best checkpoint is not shown"});
  fs::remove(best);
  const Result none = folio("info --checkpoint " + run_);
  EXPECT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(none.out.find("best         "), std::string::npos) << none.out;
  EXPECT_EQ(none.err, "");
}

// A run whose state.safetensors cannot be read still has its weights: info shows them
// and eval evaluates them (--data given), each with a warning that names the file; only
// --resume needs it.
TEST_F(CliRuns, InfoAndEvalReadARunWhoseStateIsUnreadable) {
  ASSERT_EQ(folio(train(10, run_) + " --quiet").code, 0);
  const std::string state = run_ + "/state.safetensors";
  testing::spit(state, testing::slurp(state).substr(0, 100));  // cut short
  const Result info = folio("info --checkpoint " + run_);
  EXPECT_EQ(info.code, 0) << info.err;
  testing::expect_contains(info.out, {"step         10", "parameters"});
  testing::expect_contains(info.err, {"warning: " + state + " cannot be read"});
  const Result eval = folio("eval --checkpoint " + run_ + "/best.safetensors --data " + corpus_);
  EXPECT_EQ(eval.code, 0) << eval.err;
  testing::expect_contains(eval.out, {"loss "});
  testing::expect_contains(eval.err, {"warning: " + state + " cannot be read", "0.1 is used"});
  const Result no_data = folio("eval --checkpoint " + run_);
  EXPECT_EQ(no_data.code, 2);
  testing::expect_contains(no_data.err, {"--data is needed: " + state + " cannot be read"});
  EXPECT_NE(folio("train --out " + run_ + " --resume --max-iters 20").code, 0);
}

// A directory left by a run that saved no checkpoint (killed before its first save)
// cannot be resumed: the refusal names only what works, --resume says why it cannot,
// and --overwrite starts it again.
TEST_F(CliRuns, ARunWithoutACheckpointIsNotOfferedToResume) {
  fs::create_directories(run_);
  testing::spit(run_ + "/log.csv", "step,train_loss,val_loss\n");
  const Result again = folio(train(10, run_));
  EXPECT_EQ(again.code, 2);
  testing::expect_contains(again.err, {"--out " + run_ + " already holds the files of a run that saved no checkpoint",
                                       "--overwrite"});
  EXPECT_EQ(again.err.find("--resume"), std::string::npos) << again.err;
  const Result resume = folio(train(10, run_) + " --resume");
  EXPECT_EQ(resume.code, 2);
  testing::expect_contains(resume.err, {"--resume: " + run_ + " holds no checkpoint to continue", "--overwrite"});
  const Result over = folio(train(10, run_) + " --overwrite --quiet");
  ASSERT_EQ(over.code, 0) << over.err;
  EXPECT_EQ(load_model(run_).step, 10);
}

// A run whose state.safetensors is gone (deleted to save space: only --resume reads it)
// still holds its weights: the refusals say so and offer --init-from, which trains on
// from them, not --overwrite alone, which would replace them.
TEST_F(CliRuns, WeightsWithoutAStateAreOfferedToInitFrom) {
  ASSERT_EQ(folio(train(10, run_) + " --quiet").code, 0);
  fs::remove(run_ + "/state.safetensors");
  for (const std::string flag : {"", " --resume"}) {
    const Result r = folio(train(20, run_) + flag);
    EXPECT_EQ(r.code, 2) << flag;
    testing::expect_contains(r.err, {"model.safetensors", "--init-from " + run_});
    EXPECT_EQ(r.err.find("saved no checkpoint"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("stopped before its first save"), std::string::npos) << r.err;
  }
  EXPECT_EQ(load_model(run_).step, 10);
}

// A warm-up with nothing to grow: a context of one stage, a batch of one sequence.
TEST_F(CliRuns, WarmupsWithNothingToGrowWarn) {
  const std::string run = "train --data " + corpus_ + " --out " + run_ +
                          " --n-layer 1 --n-head 2 --n-embd 16 --eval-interval 10 --eval-iters 1 --threads 1"
                          " --max-iters 2 --seq-warmup 10 --batch-warmup 10 --quiet";
  const Result r = folio(run + " --block-size 8 --batch-size 1");
  ASSERT_EQ(r.code, 0) << r.err;
  testing::expect_contains(r.err, {"warning: --seq-warmup 10 does nothing: the context (--block-size 8) is no longer "
                                   "than its first stage of 8 tokens",
                                   "warning: --batch-warmup 10 does nothing: --batch-size 1 cannot start smaller"});
  const Result grows = folio(run + " --block-size 16 --batch-size 2 --overwrite");
  ASSERT_EQ(grows.code, 0) << grows.err;
  EXPECT_EQ(grows.err.find("does nothing"), std::string::npos) << grows.err;
}

}  // namespace
}  // namespace folio
