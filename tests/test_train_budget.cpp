// What a run saves for Muon and for time budgets: the state round-trips, older states
// load as AdamW runs without a budget, and a run on a time budget stops after the step
// that spends it, its cosine ending with it.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "base/error.h"
#include "autograd/parallel.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "tests/support.h"
#include "train/progress.h"
#include "train/trainer.h"
#include "train/run_state.h"

namespace folio {
namespace {

using testing::TempDir;

TrainState muon_state() {
  TrainState s;
  s.step = 7;
  s.config.data = "corpus.txt";
  s.config.optimizer = OptimizerKind::muon;
  s.config.muon_lr = 0.05f;
  s.config.muon_weight_decay = 0.01f;
  s.config.muon_momentum_warmup = 300;
  s.config.seq_warmup = 200;
  s.config.batch_warmup = 120;
  s.config.max_time = 90;
  s.config.max_iters = 0;
  s.config.grad_accum = 3;
  s.optimizer.tensors = {{"adamw.m", flat_tensor({0.5f, -1.0f})},
                         {"adamw.v", flat_tensor({0.25f, 1.0f})},
                         {"muon.momentum", flat_tensor({1.0f, 2.0f, -3.0f})}};
  s.optimizer.counters = {{"adamw_steps", "7"}};
  s.train_seconds = 12.5;
  return s;
}

TEST(TrainState, MuonAndTrainingTimeRoundTrip) {
  const TempDir dir("muon_state");
  save_state(dir / "state.safetensors", muon_state());
  const TrainState s = load_state(dir / "state.safetensors");
  EXPECT_EQ(s.config.optimizer, OptimizerKind::muon);
  EXPECT_EQ(s.config.muon_lr, 0.05f);
  EXPECT_EQ(s.config.muon_weight_decay, 0.01f);
  EXPECT_EQ(s.config.muon_momentum_warmup, 300);
  EXPECT_EQ(s.config.seq_warmup, 200);
  EXPECT_EQ(s.config.batch_warmup, 120);
  EXPECT_EQ(s.config.max_time, 90.0);
  EXPECT_EQ(s.config.max_iters, 0);
  EXPECT_EQ(s.config.grad_accum, 3);
  ASSERT_NE(s.optimizer.find("muon.momentum"), nullptr);
  EXPECT_EQ(s.optimizer.find("muon.momentum")->to_vector(), (std::vector<float>{1.0f, 2.0f, -3.0f}));
  EXPECT_EQ(s.train_seconds, 12.5);
}

// A state written before Muon and time budgets: no optimizer, muon_* or max_time in its
// options, no train_seconds. It loads as an AdamW run without a budget.
TEST(TrainState, OlderStatesLoadAsAdamWWithoutABudget) {
  const TempDir dir("old_state");
  TrainState adamw = muon_state();
  adamw.config.optimizer = OptimizerKind::adamw;
  adamw.optimizer.tensors.pop_back();  // muon.momentum
  adamw.config.max_iters = 100;
  save_state(dir / "new.safetensors", adamw);
  SafetensorsFile f = load_safetensors(dir / "new.safetensors");
  Metadata old;
  for (auto& [k, v] : f.metadata) {
    if (k == "train_seconds") continue;
    if (k != "train_config") {
      old.emplace_back(k, v);
      continue;
    }
    Json j = Json::parse(v);
    std::erase_if(j.as_object(), [](const auto& kv) {
      return kv.first == "optimizer" || kv.first == "muon_lr" || kv.first == "muon_weight_decay" ||
             kv.first == "muon_momentum_warmup" || kv.first == "max_time" || kv.first == "grad_accum" ||
             kv.first == "decay" || kv.first == "cooldown" || kv.first == "ema" || kv.first == "seq_warmup" ||
             kv.first == "batch_warmup";
    });
    old.emplace_back(k, j.dump());
  }
  ASSERT_EQ(old.size() + 1, f.metadata.size());
  save_safetensors(dir / "old.safetensors", f.tensors, old);
  const TrainState s = load_state(dir / "old.safetensors");
  EXPECT_EQ(s.config.optimizer, OptimizerKind::adamw);
  EXPECT_EQ(s.config.max_time, 0.0);
  EXPECT_EQ(s.config.grad_accum, 1);
  EXPECT_EQ(s.train_seconds, 0.0);
  EXPECT_EQ(s.optimizer.find("muon.momentum"), nullptr);
  EXPECT_EQ(s.config.decay, Decay::cosine);
  EXPECT_EQ(s.config.ema, 0.0f);
  EXPECT_EQ(s.config.muon_momentum_warmup, 0);
  EXPECT_EQ(s.config.seq_warmup, 0);
  EXPECT_EQ(s.config.batch_warmup, 0);
  EXPECT_TRUE(s.ema_weights.empty());
}

TEST(TrainState, BadMuonFieldsAreRefusedByName) {
  const TempDir dir("bad_muon_state");
  save_state(dir / "good.safetensors", muon_state());
  const SafetensorsFile f = load_safetensors(dir / "good.safetensors");
  // A muon run's state without its momentum.
  std::vector<NamedTensor> adam_only;
  for (const auto& t : f.tensors)
    if (t.name != "muon.momentum") adam_only.push_back(t);
  save_safetensors(dir / "no_momentum.safetensors", adam_only, f.metadata);
  testing::expect_error([&] { load_state(dir / "no_momentum.safetensors"); },
                        {"no_momentum.safetensors", "muon.momentum is missing", "optimizer is muon"});
  // Fields out of range.
  for (const auto& [field, bad] : std::vector<std::pair<std::string, Json>>{
           {"optimizer", Json("sgd")}, {"optimizer", Json(1)}, {"muon_lr", Json(-1.0)}, {"max_time", Json(-5)},
           {"muon_momentum_warmup", Json(-1)}, {"muon_momentum_warmup", Json(2.5)}, {"seq_warmup", Json(-8)}, {"batch_warmup", Json(-1)},
           {"max_iters", Json(0)}}) {  // max_iters 0 with max_time 0: a run without an end
    Metadata meta = f.metadata;
    for (auto& [k, v] : meta)
      if (k == "train_config") {
        Json j = Json::parse(v);
        for (auto& [key, value] : j.as_object()) {
          if (key == field) value = bad;
          if (field == "max_iters" && key == "max_time") value = Json(0);
        }
        v = j.dump();
      }
    save_safetensors(dir / "bad.safetensors", f.tensors, meta);
    SCOPED_TRACE(field + " = " + bad.dump());
    testing::expect_error([&] { load_state(dir / "bad.safetensors"); }, {"bad.safetensors", field});
  }
}

TEST(Schedule, CosineFollowsTimeWhenAskedTo) {
  const Schedule s{.lr = 1e-3f, .min_lr = 1e-4f, .warmup_iters = 10, .decay_iters = 20, .decay_seconds = 100};
  EXPECT_FLOAT_EQ(s.at(4, 50), 1e-3f * 5 / 11);  // warm-up: in steps, whatever the time
  EXPECT_FLOAT_EQ(s.at(10, 0), 1e-3f);
  EXPECT_NEAR(s.at(500, 50), 0.55e-3f, 1e-9f);  // half the budget: halfway, whatever the step
  EXPECT_FLOAT_EQ(s.at(15, 100), 1e-4f);
  EXPECT_FLOAT_EQ(s.at(15, 250), 1e-4f);
}

// Warm-up, then lr held until the last `cooldown` of the progress, then a straight
// line to min_lr: in steps, and on the clock.
TEST(Schedule, WarmupStableDecay) {
  const Schedule steps{.lr = 1e-3f, .min_lr = 1e-4f, .warmup_iters = 10, .decay_iters = 110, .decay = Decay::wsd,
                       .cooldown = 0.2};
  EXPECT_FLOAT_EQ(steps.at(4), 1e-3f * 5 / 11);
  EXPECT_FLOAT_EQ(steps.at(10), 1e-3f);
  EXPECT_FLOAT_EQ(steps.at(90), 1e-3f);                      // 80 % of the 100 steps after the warm-up
  EXPECT_NEAR(steps.at(100), 0.55e-3f, 1e-9f);               // halfway down the line
  EXPECT_NEAR(steps.at(105), 1e-4f + 0.25f * 0.9e-3f, 1e-9f);
  EXPECT_FLOAT_EQ(steps.at(110), 1e-4f);
  EXPECT_FLOAT_EQ(steps.at(500), 1e-4f);
  const Schedule clock{.lr = 1e-3f, .min_lr = 0, .warmup_iters = 10, .decay_iters = 20, .decay_seconds = 100,
                       .decay = Decay::wsd, .cooldown = 0.5};
  EXPECT_FLOAT_EQ(clock.at(400, 50), 1e-3f);
  EXPECT_NEAR(clock.at(400, 75), 0.5e-3f, 1e-9f);
  EXPECT_FLOAT_EQ(clock.at(400, 100), 0.0f);
}

TEST(TrainState, DecayAndAverageRoundTrip) {
  const TempDir dir("ema_state");
  TrainState s = muon_state();
  s.config.decay = Decay::wsd;
  s.config.cooldown = 0.3f;
  s.config.ema = 0.95f;
  s.ema_weights = {0.25f, -2.0f};
  save_state(dir / "state.safetensors", s);
  const TrainState back = load_state(dir / "state.safetensors");
  EXPECT_EQ(back.config.decay, Decay::wsd);
  EXPECT_EQ(back.config.cooldown, 0.3f);
  EXPECT_EQ(back.config.ema, 0.95f);
  EXPECT_EQ(back.ema_weights, s.ema_weights);
  // A run that averages its weights and whose state lacks the average is refused by name.
  SafetensorsFile f = load_safetensors(dir / "state.safetensors");
  std::erase_if(f.tensors, [](const NamedTensor& t) { return t.name == "ema.weights"; });
  save_safetensors(dir / "no_average.safetensors", f.tensors, f.metadata);
  testing::expect_error([&] { load_state(dir / "no_average.safetensors"); }, {"no_average.safetensors", "ema.weights"});
}

TrainOptions tiny_timed_run(const TempDir& dir, double seconds) {
  TrainOptions o;
  o.model = {.vocab_size = 0, .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 16};
  o.train.data = testing::write_small_corpus(dir.path / "corpus.txt", 20000);
  o.train.batch_size = 4;
  o.train.max_iters = 0;  // the budget alone ends the run
  o.train.max_time = seconds;
  o.train.warmup_iters = 2;
  o.train.eval_interval = 10;
  o.train.eval_iters = 2;
  o.out_dir = dir / "run";
  o.quiet = true;
  return o;
}

// The rows of DIR/log.csv after its header, as numbers.
std::vector<std::vector<double>> log_rows(const std::string& dir) {
  std::ifstream log(dir + "/log.csv");
  std::string line;
  std::getline(log, line);
  std::vector<std::vector<double>> rows;
  while (std::getline(log, line)) {
    std::stringstream row(line);
    rows.emplace_back();
    for (std::string cell; std::getline(row, cell, ',');) rows.back().push_back(std::stod(cell));
  }
  return rows;
}
std::vector<double> last_log_row(const std::string& dir) { return log_rows(dir).back(); }

// One thread: on a busy machine two threads waiting for each other make a step so
// slow that the budget would hold too few evaluations to check.
class TrainerBudget : public ::testing::Test {
 protected:
  void SetUp() override { set_num_threads(1); }
  void TearDown() override { set_num_threads(0); }
};

TEST_F(TrainerBudget, EndsTheRunAndTheCosine) {
  const TempDir dir("budget");
  // About five evaluations inside the budget, however fast this machine steps (each
  // one saves a checkpoint: many would make the test slow, none would check nothing).
  TrainOptions probe = tiny_timed_run(dir, 1000);
  probe.train.max_iters = 20;
  probe.out_dir = dir / "probe";
  Trainer p(probe);
  p.run();
  TrainOptions o = tiny_timed_run(dir, 0.2);
  o.train.eval_interval = std::max<int64_t>(1, int64_t(0.2 / (p.train_seconds() / 20) / 5));
  Trainer t(o);
  t.run();
  EXPECT_GE(t.train_seconds(), 0.2);
  EXPECT_GT(t.step(), 2);
  const std::vector<double> last = last_log_row(o.out_dir);  // the final evaluation
  ASSERT_EQ(last.size(), log_columns().size());
  EXPECT_EQ(last[0], double(t.step()));
  EXPECT_NEAR(last[3], 1e-4, 1e-9);                // lr: the cosine has reached min_lr
  EXPECT_NEAR(last[7], t.train_seconds(), 1e-3);   // train_s
  // Every evaluation after the warm-up logged the cosine at its training time.
  int checked = 0;
  for (const std::vector<double>& row : log_rows(o.out_dir)) {
    if (row[0] < double(o.train.warmup_iters)) continue;
    const double progress = std::min(1.0, row[7] / o.train.max_time);
    EXPECT_NEAR(row[3], 1e-4 + 0.5 * (1e-3 - 1e-4) * (1 + std::cos(M_PI * progress)), 1e-8) << "step " << row[0];
    checked += progress < 1;
  }
  EXPECT_GE(checked, 1) << "no evaluation inside the budget";
  // Resumed with a larger budget, the clock goes on from the saved time.
  TrainOptions more = o;
  more.resume = true;
  more.train = saved_run(o.out_dir).config;
  EXPECT_EQ(more.train.max_iters, 0);
  more.train.max_time = 0.3;
  Trainer resumed(more);
  EXPECT_NEAR(resumed.train_seconds(), t.train_seconds(), 1e-9);
  resumed.run();
  EXPECT_GE(resumed.train_seconds(), 0.3);
  EXPECT_GT(resumed.step(), t.step());
}

// A step limit and a budget: whichever comes first ends the run; the cosine follows steps.
TEST_F(TrainerBudget, StepLimitWithABudgetKeepsTheStepSchedule) {
  const TempDir dir("budget_steps");
  TrainOptions o = tiny_timed_run(dir, 1000);
  o.train.max_iters = 6;
  Trainer t(o);
  t.run();
  EXPECT_EQ(t.step(), 6);
  EXPECT_LT(t.train_seconds(), 1000);
  EXPECT_NEAR(last_log_row(o.out_dir)[3], 1e-4, 1e-9);  // step 6 of 6: min_lr
}

}  // namespace
}  // namespace folio
