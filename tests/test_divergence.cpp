// The divergence guards (train/divergence_guard.h, train/trainer_divergence.cpp): the
// checks on their own, then tiny runs made to diverge on purpose (--fault-inject, and a
// learning rate that diverges by itself), one per policy, seen from outside through
// the folio binary: the exit code, what the run directory keeps (finite, loadable),
// what the log and stderr say; and a resume in the middle of a rollback sequence.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>

#include "autograd/parallel.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "tests/support.h"
#include "train/divergence_guard.h"
#include "train/fault_inject.h"
#include "train/run_state.h"
#include "train/trainer.h"

namespace folio {
namespace {

using namespace folio::testing;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TrainConfig guarded(int64_t window, float threshold) {
  TrainConfig c;
  c.spike_window = window, c.spike_threshold = threshold, c.grad_spike_threshold = threshold;
  return c;
}

TEST(DivergenceGuard, NonFiniteValuesDivergeAtOnce) {
  const DivergenceGuard g(guarded(4, 6), {});
  EXPECT_EQ(g.verdict(2.0f, 1.0f), "");
  EXPECT_EQ(g.verdict(kNaN, 1.0f), "the loss became nan");
  // A NaN with its sign bit set (which an -O1 build's loss gave) reads the same.
  EXPECT_EQ(g.verdict(std::copysign(kNaN, -1.0f), 1.0f), "the loss became nan");
  EXPECT_EQ(g.verdict(std::numeric_limits<float>::infinity(), 1.0f), "the loss became inf");
  EXPECT_EQ(g.verdict(2.0f, kNaN), "the gradient norm became nan");
  TrainConfig off = guarded(4, 6);
  off.on_divergence = OnDivergence::off;  // off still names them: they end the run
  EXPECT_EQ(DivergenceGuard(off, {}).verdict(kNaN, 1.0f), "the loss became nan");
}

// A spike is judged once the window is full, against the accepted steps only, by its
// z-score; a dip is never one.
TEST(DivergenceGuard, ASpikeIsAZScoreOverTheWindowOfAcceptedSteps) {
  DivergenceGuard g(guarded(4, 6), {});
  for (float loss : {3.0f, 3.1f, 2.9f}) {
    EXPECT_EQ(g.verdict(loss * 10, 1.0f), "") << "judged before the window is full";
    g.accepted(loss, 1.0f, false);
  }
  g.accepted(3.0f, 1.1f, true);  // window: losses 3, 3.1, 2.9, 3 (sd 0.0707); norms 1, 1, 1, 1.1 (sd 0.0433)
  EXPECT_EQ(g.verdict(3.4f, 1.0f), "");  // z 5.7
  expect_contains(g.verdict(3.5f, 1.0f), {"the loss 3.5 is a spike: 7.1 standard deviations above the mean 3 of the "
                                          "last 4 steps (--spike-threshold 6)"});
  EXPECT_EQ(g.verdict(0.1f, 1.0f), "");  // far below: not a spike
  expect_contains(g.verdict(3.0f, 1.4f), {"the gradient norm 1.4 is a spike"});
  expect_contains(g.verdict(3.0f, 1.4f), {"(--grad-spike-threshold 6)"});
  EXPECT_EQ(DivergenceGuard(guarded(4, 0), g.state()).verdict(300.0f, 300.0f), "") << "threshold 0: no spike test";
  // Health since the last look: the mean norm and the fraction clipped of accepted steps.
  const Health h = g.take_health();
  EXPECT_NEAR(h.grad_norm, 1.025, 1e-6);
  EXPECT_DOUBLE_EQ(h.clipped, 0.25);
  EXPECT_TRUE(std::isnan(g.take_health().grad_norm));
}

// A rollback takes the checkpoint's window and keeps the run's counters; a skip counts,
// and too many in a row stop.
TEST(DivergenceGuard, RollbacksAndSkipsCount) {
  DivergenceGuard g(guarded(4, 6), {});
  EXPECT_TRUE(g.begin(0));
  g.accepted(3.0f, 1.0f, false);
  const GuardState checkpoint = g.state();
  EXPECT_TRUE(g.begin(1));
  g.accepted(2.0f, 1.0f, false);
  EXPECT_TRUE(g.skip());
  g.rolled_back(checkpoint, 0.5f);
  g.rolled_back(checkpoint, 0.5f);
  EXPECT_EQ(g.state().losses, std::vector<float>{3.0f});
  EXPECT_EQ(g.state().rollbacks, 2);
  EXPECT_EQ(g.state().skipped, 1);
  EXPECT_EQ(g.lr_scale(), 0.25f);
  EXPECT_FALSE(g.begin(1)) << "a step begun again after a rollback is not new";
  EXPECT_TRUE(g.begin(2));
  for (int i = 1; i < DivergenceGuard::kMaxSkipsInARow; ++i) EXPECT_TRUE(g.skip());
  EXPECT_TRUE(g.skip());
  EXPECT_FALSE(g.skip());
}

TEST(FaultInject, ParsesWhatTestsWriteAndRefusesTheRest) {
  EXPECT_EQ(parse_faults("nan-grad@30,inf-loss@0,spike@7"),
            (std::vector<Fault>{{FaultKind::nan_grad, 30}, {FaultKind::inf_loss, 0}, {FaultKind::spike, 7}}));
  EXPECT_EQ(faults_text(parse_faults("nan-grad@30,spike@7")), "nan-grad@30,spike@7");
  for (const char* bad : {"nan@3", "spike", "spike@", "spike@-1", "spike@3x", "spike@3,,inf-loss@4", "nan-forward@3",
                          "nan-forward:@3", "nan-grad:gelu@3", "nan-backward:Gelu@3"})
    expect_error([&] { parse_faults(bad); }, {"fault_inject", "nan-grad@30", "got"});
  EXPECT_EQ(parse_faults("nan-forward:gelu@3,nan-backward:matmul@4"),
            (std::vector<Fault>{{FaultKind::nan_forward, 3, "gelu"}, {FaultKind::nan_backward, 4, "matmul"}}));
  EXPECT_EQ(faults_text(parse_faults("nan-backward:layer_norm@4,spike@4")), "nan-backward:layer_norm@4,spike@4");
  expect_error([] { parse_faults("nan-forward:gelu@3,nan-backward:gelu@3"); }, {"two op faults at step 3"});
}

// A tiny model that evaluates and saves every 10 steps; one thread, so runs repeat to
// the bit.
Args tiny(const TempDir& d, const std::string& out, int64_t max_iters) {
  return words(cat("train --data ", write_small_corpus(d.path / "corpus.txt"), " --out ", d / out,
                   " --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-interval 10 "
                   "--eval-iters 4 --log-interval 1000 --warmup-iters 5 --lr 3e-3 --threads 1 --quiet --max-iters ",
                   max_iters));
}
Args with(Args args, const std::string& more) {
  for (std::string& w : words(more)) args.push_back(w);
  return args;
}

bool all_finite(const nn::GPT& model) {
  const Tensor& w = model.flat_parameters();
  for (int64_t i = 0; i < w.numel(); ++i)
    if (!std::isfinite(w.data()[i])) return false;
  return true;
}

// The run's checkpoint and best weights load and are finite; returns the checkpoint's step.
int64_t expect_finite_run(const std::string& run) {
  const ModelCheckpoint ck = load_model(run), best = load_model(run + "/best.safetensors");
  EXPECT_TRUE(all_finite(*ck.model));
  EXPECT_TRUE(all_finite(*best.model));
  EXPECT_EQ(load_state(run + "/state.safetensors").step, ck.step);
  return ck.step;
}

// The last row of the run's log.csv, by column.
std::map<std::string, double> last_row(const std::string& run) {
  std::ifstream in(run + "/log.csv");
  std::string header, line, last;
  std::getline(in, header);
  while (std::getline(in, line)) last = line;
  std::map<std::string, double> row;
  std::istringstream h(header), l(last);
  for (std::string name, cell; std::getline(h, name, ',') && std::getline(l, cell, ',');)
    row[name] = std::strtod(cell.c_str(), nullptr);
  return row;
}

// skip: the step's update is dropped, counted in the log and said on stderr; the run
// goes on to its end and saves as usual.
TEST(Divergence, SkipDropsTheUpdateAndTheRunGoesOn) {
  TempDir d("diverge_skip");
  const Result r = run_folio(with(tiny(d, "run", 30), "--on-divergence skip --fault-inject nan-grad@12,inf-loss@21"),
                             d.path);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_contains(r.err, {"the gradient norm became nan (first in the gradient of ", "at step 12: its update is "
                          "skipped (1 so far)", "the loss became inf at step 21: its update is skipped (2 so far)"});
  EXPECT_EQ(expect_finite_run(d / "run"), 30);
  const auto row = last_row(d / "run");
  EXPECT_EQ(row.at("step"), 30);
  EXPECT_EQ(row.at("skipped"), 2);
  EXPECT_EQ(row.at("rollbacks"), 0);
  EXPECT_GT(row.at("grad_norm"), 0);
}

// stop: exit 3 with the reason, and the directory as the last evaluation left it.
TEST(Divergence, StopExits3AndSavesNothingNew) {
  TempDir d("diverge_stop");
  const Result r = run_folio(with(tiny(d, "run", 40), "--on-divergence stop --fault-inject inf-loss@25"), d.path);
  ASSERT_EQ(r.code, 3) << r.err;
  expect_contains(r.err, {"the loss became inf at step 25: the run stops (--on-divergence stop); the checkpoint of "
                          "step 20", d / "run"});
  EXPECT_EQ(expect_finite_run(d / "run"), 20);
  EXPECT_EQ(last_row(d / "run").at("step"), 20);
}

// rollback: back to the last checkpoint at half the learning rate, and on to the end,
// where the val loss is within 0.05 of an undisturbed run's; a spike (10x the window's
// mean) is caught like an infinite loss.
TEST(Divergence, RollbackEndsNearAnUndisturbedRun) {
  TempDir d("diverge_rollback");
  ASSERT_EQ(run_folio(tiny(d, "clean", 60), d.path).code, 0);
  const Result r = run_folio(with(tiny(d, "run", 60), "--spike-window 8 --fault-inject inf-loss@44,spike@52"), d.path);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_contains(r.err, {"the loss became inf at step 44: rolled back to step 40 (rollback 1 of --max-rollbacks 3), "
                          "the learning rate now 0.5 of the schedule's",
                          "standard deviations above the mean", "(--spike-threshold 6) at step 52: rolled back to "
                          "step 50 (rollback 2 of --max-rollbacks 3), the learning rate now 0.25"});
  EXPECT_EQ(expect_finite_run(d / "run"), 60);
  const auto row = last_row(d / "run"), clean = last_row(d / "clean");
  EXPECT_EQ(row.at("rollbacks"), 2);
  EXPECT_EQ(clean.at("rollbacks"), 0);
  EXPECT_NEAR(row.at("val_loss"), clean.at("val_loss"), 0.05);
}

// A batch of the data that makes the loss spike whatever the weights: a rollback goes
// back in the weights, not in the data, so the run does not draw it again (drawn again,
// it spiked again at every rollback, and the run stopped after --max-rollbacks).
TEST(Divergence, ARollbackDoesNotDrawTheBadBatchAgain) {
  TempDir d("diverge_bad_batch");
  const Result r = run_folio(with(tiny(d, "run", 60), "--spike-window 8 --fault-inject bad-batch@44"), d.path);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_contains(r.err, {"at step 44: rolled back to step 40 (rollback 1 of --max-rollbacks 3)"});
  EXPECT_EQ(r.err.find("rollback 2"), std::string::npos) << r.err;
  EXPECT_EQ(expect_finite_run(d / "run"), 60);
  EXPECT_EQ(last_row(d / "run").at("rollbacks"), 1);
}

// Before the first checkpoint, a rollback goes back to the run's start (kept in memory).
TEST(Divergence, RollbackBeforeTheFirstCheckpointGoesBackToTheStart) {
  TempDir d("diverge_start");
  const Result r = run_folio(with(tiny(d, "run", 10), "--fault-inject nan-grad@3"), d.path);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_contains(r.err, {"the gradient norm became nan (first in the gradient of token_embedding.weight) at step 3: "
                          "rolled back to step 0 (rollback 1 of --max-rollbacks 3)"});
  EXPECT_EQ(expect_finite_run(d / "run"), 10);
}

// A learning rate that diverges by itself (--lr 50): its evaluation loss is soon above
// twice a uniform guess's, every rollback halves it, and after --max-rollbacks the run
// stops (exit 3) with finite weights on disk.
TEST(Divergence, ALearningRateThatDivergesStopsAfterMaxRollbacks) {
  TempDir d("diverge_lr");
  Args args = with(tiny(d, "run", 200), "--lr 50 --warmup-iters 20 --eval-interval 2");
  const Result r = run_folio(args, d.path);
  ASSERT_EQ(r.code, 3) << r.err;
  expect_contains(r.err, {"is above twice a uniform guess's (2 ln ", "(rollback 3 of --max-rollbacks 3)", "the run stops (--on-divergence rollback after 3 "
                          "rollbacks: --max-rollbacks 3); the checkpoint of step "});
  expect_finite_run(d / "run");
  EXPECT_EQ(last_row(d / "run").at("rollbacks"), 3);
}

// Rollbacks before the run's next evaluation are in its log all the same: each adds the
// row of the step it went back to, with the counts (here 3 rollbacks to step 0, then a
// fourth divergence stops the run before step 10's evaluation).
TEST(Divergence, RollbacksBeforeTheNextEvaluationAreLogged) {
  TempDir d("diverge_logged");
  const Result r =
      run_folio(with(tiny(d, "run", 20), "--fault-inject nan-grad@3,nan-grad@5,nan-grad@7,nan-grad@8"), d.path);
  ASSERT_EQ(r.code, 3) << r.err;
  expect_contains(r.err, {"(rollback 3 of --max-rollbacks 3)", "the run stops (--on-divergence rollback after 3"});
  const auto row = last_row(d / "run");
  EXPECT_EQ(row.at("step"), 0);
  EXPECT_EQ(row.at("rollbacks"), 3);
  EXPECT_NEAR(row.at("lr"), 3e-3 / 6 * 0.125, 1e-9) << "step 0's lr at 1/8 of the schedule's";
  std::ifstream in(d / "run/log.csv");
  std::string header, first;
  std::getline(in, header), std::getline(in, first);
  EXPECT_EQ(std::stod(first.substr(first.find(',', first.find(',') + 1) + 1)), row.at("val_loss"))
      << "the row of step 0, repeated";
  EXPECT_EQ(expect_finite_run(d / "run"), 0);
}

// A gradient value past 1.8e19 (finite: with --grad-clip 0 nothing scales it) overflows
// AdamW's second moment while the weights stay finite. The evaluation after it must not
// save a state that cannot be read back: the guards roll back from it like from any
// divergence; with them off the run fails, saying honestly what it keeps (the last
// checkpoint's val loss is said, not called sound, and which step best.safetensors holds).
TEST(Divergence, AStateThatWouldNotReadBackIsNeverSaved) {
  TempDir d("diverge_state");
  const Result r = run_folio(with(tiny(d, "run", 30), "--grad-clip 0 --fault-inject huge-grad@12"), d.path);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_contains(r.err, {"the optimizer's adamw.v became inf at step 20: rolled back to step 10"});
  EXPECT_EQ(expect_finite_run(d / "run"), 30);
  EXPECT_EQ(run_folio(words("info --checkpoint " + (d / "run")), d.path).code, 0);

  const Result off = run_folio(
      with(tiny(d, "off", 30), "--grad-clip 0 --fault-inject huge-grad@12 --on-divergence off"), d.path);
  ASSERT_EQ(off.code, 1) << off.err;
  expect_contains(off.err, {"the optimizer's adamw.v became inf at step 20 (training diverged); the checkpoint of "
                            "step 10 (the last saved, val loss ",
                            "; --on-divergence off saves any finite evaluation) is kept in " + (d / "off"),
                            "best.safetensors there holds step "});
  EXPECT_EQ(off.err.find("evaluated sound"), std::string::npos) << off.err;
  EXPECT_EQ(expect_finite_run(d / "off"), 10);
  const Result info = run_folio(words("info --checkpoint " + (d / "off")), d.path);
  EXPECT_EQ(info.code, 0) << info.err;
  EXPECT_EQ(info.err, "");
}

// --detect-anomaly names the op that put a NaN into its output (forward) or into its
// input's gradient (backward), with its module and shape, and stops the run (exit 3)
// with the checkpoint before it kept; the fault hits the first gelu of the forward pass
// (block 0's) and the first of the backward pass (block 1's). Without it, the guards
// catch the same faults from the loss and the gradient norm and roll back.
TEST(Divergence, DetectAnomalyNamesTheOpAndItsModule) {
  TempDir d("diverge_anomaly");
  const std::string model = " --n-layer 2 --activation gelu --eval-interval 5";
  for (const auto& [fault, says] : std::vector<std::pair<std::string, std::string>>{
           {"nan-forward:gelu@7", "--detect-anomaly at step 7: forward: op gelu in blocks.0.ffwd produced nan in its "
                                  "output (4, 16, 64); the run stops; the checkpoint of step 5"},
           {"nan-backward:gelu@7", "--detect-anomaly at step 7: backward: op gelu in blocks.1.ffwd produced a "
                                   "non-finite gradient (nan) for its input 0 (4, 16, 64); the run stops; the "
                                   "checkpoint of step 5"}}) {
    const Result r = run_folio(with(tiny(d, "run", 20), model + " --overwrite --detect-anomaly --fault-inject " + fault),
                               d.path);
    EXPECT_EQ(r.code, 3) << r.err;
    expect_contains(r.err, {says});
    EXPECT_EQ(expect_finite_run(d / "run"), 5) << fault;
  }
  for (const auto& [fault, says] : std::vector<std::pair<std::string, std::string>>{
           {"nan-forward:gelu@7", "the loss became nan at step 7: rolled back to step 5"},
           {"nan-backward:gelu@7", "the gradient norm became nan (first in the gradient of "}}) {
    const Result r = run_folio(with(tiny(d, "run", 20), model + " --overwrite --fault-inject " + fault), d.path);
    EXPECT_EQ(r.code, 0) << r.err;
    expect_contains(r.err, {says, "rolled back to step 5 (rollback 1 of --max-rollbacks 3)"});
    EXPECT_EQ(expect_finite_run(d / "run"), 20) << fault;
  }
  const Result r = run_folio(with(tiny(d, "run", 20), model + " --overwrite --fault-inject nan-forward:gelo@7"), d.path);
  EXPECT_EQ(r.code, 1) << r.err;
  expect_contains(r.err, {"--fault-inject nan-forward:gelo@7: no op named 'gelo' ran in the forward pass of step 7"});
}

// What the guards are given is checked before anything runs (exit 2).
TEST(Divergence, BadGuardOptionsAreRefused) {
  TempDir d("diverge_options");
  for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
           {"--fault-inject nan@3", "--fault-inject 'nan@3': expected faults such as nan-grad@30"},
           {"--on-divergence maybe", "--on-divergence must be skip, rollback, stop or off, got 'maybe'"},
           {"--rollback-lr-factor 0", "--rollback-lr-factor must be positive, got 0"},
           {"--spike-window 1", "--spike-window must be >= 2, got 1"}}) {
    const Result r = run_folio(with(tiny(d, "run", 10), flags), d.path);
    EXPECT_EQ(r.code, 2) << flags;
    expect_contains(r.err, {says});
    EXPECT_FALSE(fs::exists(d / "run")) << flags;
  }
}

// A resume in the middle of a rollback sequence, after the first of two rollbacks (its
// learning-rate factor saved with the run) and before the second, ends with the weights,
// the optimizer and the guards of the run never stopped, to the bit.
TEST(Divergence, ResumeInTheMiddleOfARollbackSequenceIsBitExact) {
  const TempDir straight("diverge_straight"), split("diverge_split");
  auto options = [](const TempDir& d, int64_t max_iters) {
    TrainOptions o;
    o.model = {.vocab_size = 0, .block_size = 16, .n_layer = 1, .n_head = 2, .n_embd = 16};
    o.train.data = write_small_corpus(d.path / "corpus.txt");
    o.train.batch_size = 4, o.train.max_iters = max_iters, o.train.lr_decay_iters = 60;
    o.train.warmup_iters = 5, o.train.eval_interval = 10, o.train.eval_iters = 2, o.train.lr = 3e-3f;
    o.train.spike_window = 8;
    o.faults = parse_faults("nan-grad@25,spike@47");
    o.out_dir = d / "run";
    o.quiet = true;
    return o;
  };
  set_num_threads(1);  // the suite runs two tests at a time
  Trainer(options(straight, 60)).run();
  Trainer(options(split, 30)).run();  // rolled back at 25 to 20, saved at 30
  EXPECT_EQ(load_state(split / "run/state.safetensors").guards.rollbacks, 1);
  TrainOptions second = options(split, 60);
  second.resume = true;
  second.train = saved_run(second.out_dir).config;
  second.train.max_iters = 60;
  Trainer(second).run();  // rolled back at 47 to 40
  EXPECT_TRUE(slurp(straight / "run/model.safetensors") == slurp(split / "run/model.safetensors"));
  const SafetensorsFile a = load_safetensors(straight / "run/state.safetensors");
  const SafetensorsFile b = load_safetensors(split / "run/state.safetensors");
  for (size_t i = 0; i < a.tensors.size() && i < b.tensors.size(); ++i)
    EXPECT_TRUE(a.tensors[i].tensor.to_vector() == b.tensors[i].tensor.to_vector()) << a.tensors[i].name;
  const GuardState ga = load_state(straight / "run/state.safetensors").guards;
  const GuardState gb = load_state(split / "run/state.safetensors").guards;
  EXPECT_EQ(ga.rollbacks, 2);
  EXPECT_EQ(gb.rollbacks, 2);
  EXPECT_EQ(ga.lr_scale, 0.25f);
  EXPECT_EQ(gb.lr_scale, 0.25f);
  EXPECT_EQ(ga.losses, gb.losses);
  EXPECT_EQ(ga.norms, gb.norms);
  EXPECT_EQ(ga.furthest_step, gb.furthest_step);
  set_num_threads(0);
}

}  // namespace
}  // namespace folio
