// One writer a run directory, through the folio binary: while a folio train writes a
// run, a second one on the same --out (a --resume from another terminal, an
// --overwrite) is refused, exit 2, before it touches anything. Two writers would
// interleave their saves (the same pending file names) into a state of one step
// beside the weights of another, which no --resume accepts.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>

#include "io/checkpoint.h"
#include "tests/support.h"
#include "train/run_state.h"

namespace folio {
namespace {

using namespace folio::testing;

Args tiny_train(const std::string& corpus, const std::string& out, const std::string& max_iters) {
  return {"train", "--data", corpus, "--out", out, "--n-layer", "1", "--n-head", "2", "--n-embd", "16",
          "--block-size", "16", "--batch-size", "4", "--eval-interval", "2", "--eval-iters", "1",
          "--warmup-iters", "2", "--threads", "1", "--quiet", "--max-iters", max_iters};
}

TEST(RunDirLock, ASecondTrainerOnARunBeingWrittenIsRefused) {
  TempDir d("run_dir_lock");
  const std::string corpus = write_small_corpus(d.path / "corpus.txt"), run = d / "run";
  const Child first = spawn_folio(tiny_train(corpus, run, "100000000"), "", d / "first.err");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(run + "/state.safetensors") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(fs::exists(run + "/state.safetensors")) << slurp(d / "first.err");
  // Asked for no more steps than the run has done, --resume would only say so: it is
  // refused all the same, as its reading of the directory would recover a save in flight.
  Args overwrite = tiny_train(corpus, run, "4");
  overwrite.push_back("--overwrite");
  for (const Args& second : {Args{"train", "--resume", "--out", run, "--max-iters", "1"}, overwrite}) {
    const Result r = run_folio(second, d.path);
    EXPECT_EQ(r.code, 2) << show(second) << "\n" << r.err;
    expect_contains(r.err, {run + ": another trainer is writing this run directory"});
  }
  ::kill(first.pid, SIGINT);
  const Exit x = wait_child(first.pid, 120);
  ASSERT_TRUE(x.exited) << "killed by signal " << x.signal;
  EXPECT_EQ(x.code, 128 + SIGINT) << slurp(d / "first.err");
  const int64_t step = load_model(run).step;
  EXPECT_EQ(load_state(run + "/state.safetensors").step, step);
  // Its writer gone, the run is free again.
  const Args resume{"train", "--resume", "--out", run, "--max-iters", std::to_string(step + 2)};
  const Result resumed = run_folio(resume, d.path);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(load_model(run).step, step + 2);
}

// A fresh run in its first evaluation has written its log but no state yet: a second
// folio train on its --out was told that it held "a run that saved no checkpoint" (start
// it again with --overwrite), and a --resume that its run "stopped before its first
// save". Both are now told that another trainer is writing it.
TEST(RunDirLock, ARunInItsFirstEvaluationIsSaidToBeWritten) {
  TempDir d("run_dir_lock_first");
  const std::string corpus = write_small_corpus(d.path / "corpus.txt"), run = d / "run";
  Args first_args = tiny_train(corpus, run, "10");
  *(std::find(first_args.begin(), first_args.end(), "--eval-iters") + 1) = "100000000";  // the first evaluation lasts
  const Child first = spawn_folio(first_args, "", d / "first.err");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(run + "/log.csv") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(fs::exists(run + "/log.csv")) << slurp(d / "first.err");
  ASSERT_FALSE(fs::exists(run + "/state.safetensors"));
  for (const Args& second : {tiny_train(corpus, run, "4"), Args{"train", "--resume", "--out", run}}) {
    const Result r = run_folio(second, d.path);
    EXPECT_EQ(r.code, 2) << show(second) << "\n" << r.err;
    expect_contains(r.err, {run + ": another trainer is writing this run directory"});
  }
  ::kill(first.pid, SIGKILL);
  wait_child(first.pid, 120);
}

}  // namespace
}  // namespace folio
