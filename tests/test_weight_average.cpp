// The average of the weights (--ema): its recurrence against a plain double-precision
// loop, what a run evaluates and keeps as best.safetensors, and an exact resume.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/parallel.h"
#include "io/checkpoint.h"
#include "io/run_dir.h"
#include "tests/support.h"
#include "train/trainer.h"
#include "train/weight_average.h"
#include "train/run_state.h"

namespace folio {
namespace {

using testing::TempDir;

nn::GPTConfig tiny_model() { return {.vocab_size = 11, .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 16}; }

TEST(WeightAverage, FollowsItsRecurrence) {
  nn::GPT model(tiny_model());
  const float decay = 0.9f;
  WeightAverage average(model, decay);
  const Tensor& w = model.flat_parameters();  // (P,)
  std::vector<double> expected(w.data(), w.data() + w.numel());
  Rng rng(3);
  for (int64_t step = 0; step < 40; ++step) {
    for (int64_t i = 0; i < w.numel(); ++i) w.data()[i] += 0.1f * (rng.uniform() - 0.5f);  // an "update"
    average.update(model, step);
    const double d = std::min(double(decay), double(1 + step) / double(10 + step));
    EXPECT_FLOAT_EQ(average.decay_at(step), float(d));
    for (int64_t i = 0; i < w.numel(); ++i) expected[size_t(i)] = d * expected[size_t(i)] + (1 - d) * w.data()[i];
  }
  const std::span<const float> got = average.weights();
  ASSERT_EQ(int64_t(got.size()), w.numel());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - expected[i]));
  EXPECT_LT(worst, 1e-6);
  // The average lags the weights: it is not a copy of them.
  EXPECT_GT(std::abs(double(got[0]) - double(w.data()[0])) + std::abs(double(got[1]) - double(w.data()[1])), 1e-4);
  EXPECT_FALSE(average.model().training());  // evaluated without dropout
}

TrainOptions averaged_run(const TempDir& dir, const std::string& name, int64_t steps) {
  TrainOptions o;
  o.model = tiny_model();
  o.model.dropout = 0.1f;
  o.train.data = testing::write_small_corpus(dir.path / "corpus.txt", 20000);
  o.train.batch_size = 4;
  o.train.max_iters = steps;
  o.train.lr_decay_iters = 40;
  o.train.warmup_iters = 2;
  o.train.eval_interval = 10;
  o.train.eval_iters = 2;
  o.train.ema = 0.9f;
  o.out_dir = dir / name;
  o.quiet = true;
  return o;
}

std::vector<float> weights_of(const std::string& file) {
  const ModelCheckpoint ck = load_model(file);
  return ck.model->flat_parameters().to_vector();
}

// Evaluations measure the average, and best.safetensors holds it; model.safetensors
// keeps the weights the optimizer steps (what --resume continues from).
TEST(WeightAverage, IsWhatTheRunEvaluatesAndKeepsAsBest) {
  const TempDir dir("ema_run");
  set_num_threads(1);
  TrainOptions o = averaged_run(dir, "run", 40);
  o.train.eval_interval = 40;  // evaluations at steps 0 and 40: the second is the best
  Trainer t(o);
  const Trainer::Losses last = t.run();
  const TrainState st = load_state(o.out_dir + "/state.safetensors");
  const std::vector<float> best = weights_of(o.out_dir + "/best.safetensors");
  EXPECT_EQ(best, st.ema_weights);
  EXPECT_NE(best, weights_of(o.out_dir + "/model.safetensors"));
  EXPECT_EQ(st.best_val_loss, last.val);
  // The logged val loss is the average's: a model loaded from best.safetensors scores it.
  TrainOptions check = o;
  check.resume = true;
  check.train = st.config;
  Trainer again(check);
  EXPECT_EQ(again.evaluate().val, last.val);
  set_num_threads(0);
}

// 20 + 20 steps give the same weights and the same average as 40, on two threads with
// dropout (each shard draws its masks, as in TrainerResume).
TEST(WeightAverage, ResumesExactly) {
  const TempDir dir("ema_resume");
  set_num_threads(2);
  Trainer(averaged_run(dir, "straight", 40)).run();
  Trainer(averaged_run(dir, "split", 20)).run();
  TrainOptions second = averaged_run(dir, "split", 40);
  second.resume = true;
  second.train = saved_run(second.out_dir).config;
  second.train.max_iters = 40;
  Trainer(second).run();
  for (const char* file : {"/model.safetensors", "/best.safetensors"})
    EXPECT_EQ(weights_of(dir / "straight" + file), weights_of(dir / "split" + file)) << file;
  EXPECT_EQ(load_state(dir / "straight/state.safetensors").ema_weights,
            load_state(dir / "split/state.safetensors").ema_weights);
  set_num_threads(0);
}

}  // namespace
}  // namespace folio
