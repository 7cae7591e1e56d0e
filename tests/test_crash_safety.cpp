// Crash safety of a training run, seen from outside through the folio binary:
// SIGKILL at random moments, Ctrl-C, and a run whose numbers blow up. Whatever
// happens, the run directory keeps a checkpoint that loads and that --resume
// continues from.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include "base/error.h"
#include "tests/support.h"
#include "io/checkpoint.h"
#include "train/run_state.h"

namespace folio {
namespace {

using namespace folio::testing;

// A tiny model that evaluates and saves every 2 steps, so a random moment is as
// likely to fall inside a save as between two. One thread: the suite runs two
// tests at a time on small machines, and one thread keeps runs bit-reproducible.
Args tiny_train(const std::string& corpus, const std::string& out, int64_t max_iters) {
  return {"train", "--data", corpus, "--out", out, "--n-layer", "1", "--n-head", "2", "--n-embd", "16",
          "--block-size", "16", "--batch-size", "4", "--eval-interval", "2", "--eval-iters", "1",
          "--log-interval", "1000", "--warmup-iters", "5", "--lr", "3e-3", "--lr-decay-iters", "10", "--threads", "1",
          "--max-iters", std::to_string(max_iters)};
}

// Replaces the value of option `name` in args (which must have it).
void set_option(Args& args, const std::string& name, const std::string& value) {
  const auto it = std::find(args.begin(), args.end(), name);
  ASSERT_TRUE(it != args.end() && it + 1 != args.end()) << name << " not in the arguments";
  *(it + 1) = value;
}

Args resume(const std::string& out, int64_t max_iters) {
  return {"train", "--resume", "--out", out, "--threads", "1", "--max-iters", std::to_string(max_iters)};
}

// Waits (up to timeout_s) until `file` exists; false if the child ended first.
bool wait_for_file(const fs::path& file, pid_t child, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(file)) return true;
    int status;
    if (::waitpid(child, &status, WNOHANG) == child) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// The files a run directory holds once nothing is in flight.
std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}
// commands.txt: the commands that started the run and its resumes, one a line (folio report).
const std::set<std::string> kRunFiles{"best.safetensors", "commands.txt", "log.csv", "loss.svg", "model.safetensors",
                                      "state.safetensors"};

bool all_finite(const nn::GPT& model) {
  for (const auto& [name, p] : model.named_parameters())
    for (int64_t i = 0; i < p.numel(); ++i)
      if (!std::isfinite(p.data()[i])) return false;
  return true;
}

// The checkpoint in `run` is whole: `folio info` reads it, the model and the state
// load in-process, and their steps agree once a resume has settled them.
void expect_loadable(const TempDir& d, const std::string& run) {
  const Result info = run_folio({"info", "--checkpoint", run}, d.path);
  EXPECT_EQ(info.code, 0) << info.err;
  EXPECT_NO_THROW(load_model(run));
  EXPECT_NO_THROW(load_model(run + "/best.safetensors"));
  EXPECT_NO_THROW(load_state(run + "/state.safetensors"));
}

// The number after the first `prefix` in `text` ("at step 12" -> 12), or -1.
int64_t number_after(const std::string& text, const std::string& prefix) {
  const size_t at = text.find(prefix);
  if (at == std::string::npos) return -1;
  const size_t from = at + prefix.size();
  size_t to = from;
  while (to < text.size() && std::isdigit(static_cast<unsigned char>(text[to]))) ++to;
  return to > from ? std::stoll(text.substr(from, to - from)) : -1;
}

uint64_t crash_seed() {
  if (const char* s = std::getenv("FOLIO_CRASH_SEED")) return std::stoull(s);
  return std::random_device{}();
}

// SIGKILL lands anywhere: in a step, in an evaluation, between or inside the writes
// of a save. Every time, the directory must load and --resume must go on from it.
TEST(CrashSafety, SigkillAtRandomMomentsNeverLosesTheRun) {
  TempDir d("crash_kill");
  const std::string corpus = write_small_corpus(d.path / "corpus.txt"), run = d / "run";
  const uint64_t seed = crash_seed();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("FOLIO_CRASH_SEED=" + std::to_string(seed) + " reproduces the kill delays");
  std::uniform_int_distribution<int> delay_ms(0, 400);
  int64_t resumed_to = 0;
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const Child c = spawn_folio(round == 0 ? tiny_train(corpus, run, 1000000) : resume(run, 1000000),
                                d / "train.out", d / "train.err");
    // The first round has nothing to lose until its first checkpoint exists.
    if (round == 0) {
      for (const char* f : {"state.safetensors", "model.safetensors", "best.safetensors"})
        ASSERT_TRUE(wait_for_file(d.path / "run" / f, c.pid, 120)) << f << ": " << slurp(d / "train.err");
    }
    const int ms = delay_ms(rng);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    ::kill(c.pid, SIGKILL);
    const Exit x = wait_child(c.pid, 30);
    ASSERT_EQ(x.signal, SIGKILL) << "the run ended by itself (exit " << x.code << "): " << slurp(d / "train.err");

    expect_loadable(d, run);
    const TrainState killed_at = load_state(run + "/state.safetensors");
    EXPECT_GE(killed_at.step, resumed_to);  // nothing committed is ever lost
    const int64_t target = killed_at.step + 3;
    const Result r = run_folio(resume(run, target), d.path);
    ASSERT_EQ(r.code, 0) << "resume after a kill " << ms << " ms in failed: " << r.err;
    const ModelCheckpoint ck = load_model(run);
    EXPECT_EQ(ck.step, target);
    EXPECT_EQ(load_state(run + "/state.safetensors").step, target);
    EXPECT_EQ(entries(run), kRunFiles) << "leftovers after resuming";
    resumed_to = target;
  }
}

// One directory: a run `straight` trained to step 10 and a run `cut` stopped at `step`.
struct CutRun {
  CutRun(const char* name, int64_t step) : d(name), corpus(write_small_corpus(d.path / "corpus.txt")) {
    EXPECT_EQ(run_folio(tiny_train(corpus, straight, 10), d.path).code, 0);
    EXPECT_EQ(run_folio(tiny_train(corpus, cut, step), d.path).code, 0);
  }
  TempDir d;
  std::string corpus, straight = d / "straight", cut = d / "cut";
};

// Resumes `cut` to step 10 and expects the run files of an uninterrupted run, with
// the same bytes as `straight`'s.
void expect_resume_ends_as(const std::string& cut, const std::string& straight, const TempDir& d) {
  const Result r = run_folio(resume(cut, 10), d.path);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(entries(cut), kRunFiles);
  EXPECT_EQ(slurp(cut + "/model.safetensors"), slurp(straight + "/model.safetensors"))
      << "the resumed run differs from the uninterrupted one";
  EXPECT_EQ(slurp(cut + "/best.safetensors"), slurp(straight + "/best.safetensors"));
}

// What SIGKILL at the worst moment leaves: the new state committed, the model file
// not yet replaced (the weights for that step wait in model.safetensors.pending).
// Readers still see the previous, complete model; --resume finishes the save first,
// and the resumed run ends bit-identical to one that was never interrupted.
TEST(CrashSafety, ResumeFinishesASaveCutShortAfterItsCommit) {
  const CutRun run("crash_window", 4);
  const auto& [d, corpus, straight, cut] = run;
  const std::string step4_model = slurp(cut + "/model.safetensors");
  ASSERT_EQ(run_folio(resume(cut, 6), d.path).code, 0);
  // Rewind the model file alone: state at 6, model.safetensors at 4, the step-6
  // weights pending.
  fs::rename(cut + "/model.safetensors", cut + "/model.safetensors.pending");
  spit(cut + "/model.safetensors", step4_model);
  EXPECT_EQ(load_model(cut).step, 4);  // generate, eval and info read a complete, older model
  EXPECT_EQ(run_folio({"info", "--checkpoint", cut}, d.path).code, 0);

  expect_resume_ends_as(cut, straight, d);
}

// The other side of the commit: a kill after the pending weights were written but
// before the state was replaced. That save never happened; resume drops the
// pending file (and any temp file of a killed writer) and replays from the state.
TEST(CrashSafety, ResumeDropsASaveCutShortBeforeItsCommit) {
  const CutRun run("crash_precommit", 6);
  const auto& [d, corpus, straight, cut] = run;
  const std::string step6_model = slurp(cut + "/model.safetensors");
  // A stray pending model from a "later" save and a half-written temp file of a dead writer.
  ASSERT_EQ(run_folio(tiny_train(corpus, d / "later", 8), d.path).code, 0);
  fs::copy_file(d / "later/model.safetensors", cut + "/model.safetensors.pending");
  spit(cut + "/state.safetensors.tmp.999999999", "half a file");
  EXPECT_EQ(load_model(cut).step, 6);
  expect_resume_ends_as(cut, straight, d);
}

// Ctrl-C or SIGTERM: the run finishes its step, evaluates, saves, says where on stderr
// (under --quiet too), and exits 128 + the signal, as a shell expects of a program a
// signal stopped. The checkpoint is complete and resumable.
class StopSignal : public ::testing::TestWithParam<int> {};

TEST_P(StopSignal, SavesACheckpointAndExitsWithTheSignalsCode) {
  const int sig = GetParam();
  TempDir d(sig == SIGINT ? "crash_sigint" : "crash_sigterm");
  const std::string corpus = write_small_corpus(d.path / "corpus.txt"), run = d / "run";
  Args args = tiny_train(corpus, run, 1000000);
  if (sig == SIGTERM) args.push_back("--quiet");
  const Child c = spawn_folio(args, d / "train.out", d / "train.err");
  for (const char* f : {"state.safetensors", "model.safetensors", "best.safetensors"})
    ASSERT_TRUE(wait_for_file(d.path / "run" / f, c.pid, 120)) << f << ": " << slurp(d / "train.err");
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ::kill(c.pid, sig);
  const Exit x = wait_child(c.pid, 60);
  ASSERT_FALSE(x.timed_out) << strsignal(sig) << " did not stop training";
  EXPECT_TRUE(x.exited) << "killed by signal " << x.signal;
  EXPECT_EQ(x.code, 128 + sig) << slurp(d / "train.err");
  const std::string err = slurp(d / "train.err");
  const int64_t step = number_after(err, "at step ");
  ASSERT_GT(step, 0) << err;
  const std::string by = std::string("interrupted by ") + (sig == SIGINT ? "SIGINT" : "SIGTERM");
  EXPECT_NE(err.find(by), std::string::npos) << err;
  EXPECT_NE(err.find("checkpoint saved in " + run), std::string::npos) << err;
  // Besides, not --quiet, the line that step 0's evaluation has begun.
  const bool evaluating = sig == SIGINT;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), evaluating ? 2 : 1) << err;
  EXPECT_EQ(err.rfind("evaluating step 0 ", 0) == 0, evaluating) << err;
  expect_loadable(d, run);
  EXPECT_EQ(load_model(run).step, step);
  EXPECT_EQ(load_state(run + "/state.safetensors").step, step);
  EXPECT_EQ(entries(run), kRunFiles);
  const Result r = run_folio(resume(run, step + 2), d.path);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(load_model(run).step, step + 2);
}
INSTANTIATE_TEST_SUITE_P(CrashSafety, StopSignal, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& info) { return info.param == SIGINT ? "Sigint" : "Sigterm"; });

// `folio train | head`: the reader of the progress goes away. The run stops as on
// SIGTERM (saved, exit 128 + SIGPIPE) instead of dying between a log row and its save,
// and the log never runs ahead of the checkpoint.
TEST(CrashSafety, AClosedProgressPipeStopsTheRunLikeSigterm) {
  TempDir d("crash_sigpipe");
  const std::string corpus = write_small_corpus(d.path / "corpus.txt"), run = d / "run";
  const std::string fifo = d / "progress";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // First, so that the child's open does not wait; not inherited, or the child would be a reader too.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  const Child c = spawn_folio(tiny_train(corpus, run, 1000000), fifo, d / "train.err");
  std::string seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (seen.find("step 4:") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    char buf[4096];
    const ssize_t n = ::read(reader, buf, sizeof buf);
    if (n > 0) seen.append(buf, size_t(n));
    else std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::close(reader);  // as head does once it has its lines
  ASSERT_NE(seen.find("step 4:"), std::string::npos) << seen << slurp(d / "train.err");
  const Exit x = wait_child(c.pid, 60);
  ASSERT_FALSE(x.timed_out) << "a closed pipe did not stop training";
  ASSERT_TRUE(x.exited) << "killed by signal " << x.signal;
  EXPECT_EQ(x.code, 128 + SIGPIPE) << slurp(d / "train.err");
  EXPECT_NE(slurp(d / "train.err").find("interrupted by SIGPIPE"), std::string::npos) << slurp(d / "train.err");
  expect_loadable(d, run);
  const int64_t step = load_model(run).step;
  EXPECT_EQ(load_state(run + "/state.safetensors").step, step);
  std::ifstream log(run + "/log.csv");
  std::string line, last;
  while (std::getline(log, line)) last = line;
  EXPECT_EQ(std::stoll(last), step) << "the log's last row is not the checkpoint's step";
}

// `folio train | true`: the reader is gone before the first line, so the first write
// of the loop, step 0's evaluation line, asks the run to stop while it evaluates. That
// evaluation's save is the run's last: no step 1 and no second evaluation after it.
TEST(CrashSafety, AStopHeardDuringAnEvaluationEndsTheRunAtItsCheckpoint) {
  TempDir d("crash_stop_in_eval");
  const std::string corpus = write_small_corpus(d.path / "corpus.txt"), run = d / "run";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);  // no reader: every write to the pipe raises SIGPIPE
  std::vector<std::string> all{FOLIO_BINARY};
  for (const std::string& a : tiny_train(corpus, run, 1000)) all.push_back(a);
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string err = d / "train.err";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (e < 0 || ::dup2(fds[1], 1) < 0 || ::dup2(e, 2) < 0) ::_exit(127);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  const Exit x = wait_child(pid, 120);
  ASSERT_TRUE(x.exited) << "killed by signal " << x.signal << slurp(err);
  EXPECT_EQ(x.code, 128 + SIGPIPE) << slurp(err);
  expect_contains(slurp(err), {"interrupted by SIGPIPE at step 0: checkpoint saved in " + run});
  EXPECT_EQ(load_model(run).step, 0);
  EXPECT_EQ(load_state(run + "/state.safetensors").step, 0);
  EXPECT_EQ(entries(run), kRunFiles);
  const std::string log = slurp(run + "/log.csv");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 2) << log;  // the header and step 0's row
}

// A learning rate that makes the weights overflow: training stops with exit code 1
// and one line naming the step, and the checkpoint on disk is the last one whose
// evaluation was finite (never one saved from a NaN evaluation or with a non-finite
// weight): it loads, its weights are finite, and best.safetensors, the one to go back
// to, still evaluates to a finite loss. (The last checkpoint itself may be on the
// edge: its weights can be finite yet huge enough that the very next batch overflows.)
// Trains at lr 1e6 until the weights blow up; the run must fail with one line (exit 1,
// --on-divergence off).
// warmup_iters: the lr climbs by 1e6 / warmup_iters per step (1: at once).
Result run_diverging(const TempDir& d, const std::string& corpus, const std::string& run, const char* warmup_iters,
                     const char* lr = "1e6") {
  Args args = tiny_train(corpus, run, 100000000);  // the weights blow up long before, even in a warm-up
  set_option(args, "--lr", lr);
  set_option(args, "--warmup-iters", warmup_iters);
  set_option(args, "--lr-decay-iters", "0");
  // With the guards off: the run fails as it always did (the guards' policies are
  // tests/test_divergence.cpp's).
  args.insert(args.end(), {"--on-divergence", "off"});
  const Result r = run_folio(args, d.path);
  EXPECT_EQ(r.code, 1) << r.err;
  // Besides the line that step 0's evaluation has begun.
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;
  EXPECT_EQ(r.err.rfind("evaluating step 0 ", 0), 0u) << r.err;
  return r;
}

TEST(CrashSafety, DivergenceStopsAtTheStepAndKeepsTheLastGoodCheckpoint) {
  TempDir d("crash_diverge");
  const std::string corpus = write_small_corpus(d.path / "corpus.txt"), run = d / "run";
  // lr climbs by 1 per step: fine for a few steps, then the weights blow up, a few
  // checkpoints in.
  const Result r = run_diverging(d, corpus, run, "1000000");
  ASSERT_EQ(r.code, 1);
  const int64_t bad_step = number_after(r.err, "at step ");
  ASSERT_GT(bad_step, 0) << r.err;
  EXPECT_NE(r.err.find(run), std::string::npos) << r.err;  // says where the checkpoint is

  expect_loadable(d, run);
  const ModelCheckpoint ck = load_model(run);
  EXPECT_LE(ck.step, bad_step);
  EXPECT_GT(ck.step, 0);
  EXPECT_NE(r.err.find("step " + std::to_string(ck.step)), std::string::npos) << r.err;  // and which step it holds
  EXPECT_TRUE(all_finite(*ck.model));
  EXPECT_TRUE(all_finite(*load_model(run + "/best.safetensors").model));
  EXPECT_EQ(load_state(run + "/state.safetensors").step, ck.step);
  EXPECT_EQ(entries(run), kRunFiles);
  EXPECT_NE(r.err.find("best.safetensors"), std::string::npos) << r.err;
  const Result e = run_folio({"eval", "--checkpoint", run + "/best.safetensors", "--data", corpus}, d.path);
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_EQ(e.out.find("nan"), std::string::npos) << e.out;
  EXPECT_EQ(e.out.find("inf"), std::string::npos) << e.out;
}

// Divergence in the first steps: step 0's evaluation saved the weights the run started
// from, and the message names that checkpoint.
TEST(CrashSafety, DivergenceInTheFirstStepsKeepsTheStartsCheckpoint) {
  TempDir d("crash_diverge0");
  const std::string corpus = write_small_corpus(d.path / "corpus.txt"), run = d / "run";
  // The first step's update makes the weights ~1e30: the next forward overflows.
  const Result r = run_diverging(d, corpus, run, "1", "1e30");
  ASSERT_EQ(r.code, 1);
  EXPECT_GE(number_after(r.err, "at step "), 0) << r.err;
  expect_contains(r.err, {"the checkpoint of step 0 (the last saved, val loss ", "best.safetensors there holds step 0"});
  expect_loadable(d, run);
  EXPECT_EQ(load_model(run).step, 0);
  EXPECT_TRUE(all_finite(*load_model(run).model));
  EXPECT_EQ(load_state(run + "/state.safetensors").step, 0);
}

}  // namespace
}  // namespace folio
