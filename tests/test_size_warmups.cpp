// Sequence-length and batch-size warm-ups (--seq-warmup, --batch-warmup): the window
// and the batch of each step, and runs that train on the short windows and the small
// batches they name. Exact resume in the middle of either runs in test_train.cpp
// (TrainerResume), and a batch-size warm-up on two ranks in test_mpi.sh.
#include <gtest/gtest.h>

#include <array>
#include <set>

#include "autograd/parallel.h"
#include "tests/support.h"
#include "train/size_warmups.h"
#include "train/trainer.h"

namespace folio {
namespace {

// Over a warm-up of 1111 steps, size_at(step, full, 1111) for each full size: never
// shrinks, takes whole stages (stage_of(full), at least `least`) until it reaches full,
// ends at full, and takes nine sizes at most.
template <class SizeAt, class StageOf>
void expect_whole_stages(SizeAt size_at, StageOf stage_of, std::initializer_list<int64_t> fulls, int64_t least) {
  for (int64_t full : fulls) {
    std::set<int64_t> sizes;
    int64_t before = 0;
    for (int64_t step = 0; step <= 1200; ++step) {
      const int64_t n = size_at(step, full, 1111);
      EXPECT_GE(n, before) << full;
      EXPECT_TRUE(n == full || (n >= least && n % stage_of(full) == 0)) << full << " " << n;
      sizes.insert(before = n);
    }
    EXPECT_EQ(before, full);
    EXPECT_LE(sizes.size(), 9u) << full;
  }
}

// A warm-up of 100 steps to a size `full` of eight stages (full / 8 each): the size is
// stage + (full - stage) * step / 100, rounded down to a whole stage, from step 100 on
// full; a warm-up of 0 steps is off.
template <class SizeAt>
void expect_eight_stages(SizeAt size_at, int64_t full) {
  const int64_t stage = full / 8;
  EXPECT_EQ(size_at(0, full, 100), stage);
  EXPECT_EQ(size_at(14, full, 100), stage);       // 1.98 stages
  EXPECT_EQ(size_at(15, full, 100), 2 * stage);   // 2.05
  EXPECT_EQ(size_at(50, full, 100), 4 * stage);   // 4.5
  EXPECT_EQ(size_at(99, full, 100), 7 * stage);   // 7.93
  EXPECT_EQ(size_at(100, full, 100), full);
  EXPECT_EQ(size_at(5000, full, 100), full);
  EXPECT_EQ(size_at(0, full, 0), full);  // off
}

TEST(SeqWarmup, WindowGrowsByStagesToTheContext) {
  expect_eight_stages(window_length, 64);  // 8 + 56 * step / 100, down to a multiple of 8
  EXPECT_EQ(window_length(0, 8, 100), 8);  // no window shorter than 8 tokens
  EXPECT_EQ(window_length(0, 5, 100), 5);
  // A context that is not a multiple of its stage (12): 12 + 88 * 0.99, down to 96.
  EXPECT_EQ(window_length(99, 100, 100), 96);
  EXPECT_EQ(window_length(100, 100, 100), 100);
  // A long context: stages of an eighth of it; nine lengths at most; no overflow at the
  // step limit.
  EXPECT_EQ(seq_warmup_stage(1024), 128);
  EXPECT_EQ(window_length(0, 1024, 1000), 128);
  EXPECT_EQ(window_length(TrainConfig::kMaxIters - 1, 1024, TrainConfig::kMaxIters), 896);
  expect_whole_stages(window_length, seq_warmup_stage, {9, 64, 100, 300, 1024, 65536}, 8);
}

TEST(BatchWarmup, BatchGrowsByStagesToTheBatchSize) {
  expect_eight_stages(batch_size_at, 32);  // 4 + 28 * step / 100, down to a multiple of 4
  // Small batches: stages of one sequence, or two from 9 on.
  EXPECT_EQ(batch_size_at(0, 5, 100), 1);
  EXPECT_EQ(batch_size_at(50, 5, 100), 3);
  EXPECT_EQ(batch_size_at(0, 1, 100), 1);
  EXPECT_EQ(batch_size_at(0, 12, 100), 2);
  EXPECT_EQ(batch_size_at(70, 12, 100), 8);  // 9
  // A batch that is not a multiple of its stage (13): 13 + 87 * 0.99, down to 91.
  EXPECT_EQ(batch_size_at(99, 100, 100), 91);
  // The largest batch at the step limit: no overflow.
  EXPECT_EQ(batch_warmup_stage(TrainConfig::kMaxBatch), TrainConfig::kMaxBatch / 8);
  EXPECT_EQ(batch_size_at(TrainConfig::kMaxIters - 1, TrainConfig::kMaxBatch, TrainConfig::kMaxIters),
            TrainConfig::kMaxBatch / 8 * 7);
  expect_whole_stages(batch_size_at, batch_warmup_stage, {1, 3, 8, 9, 12, 15, 32, 100, 1000}, 1);
}

// 12 steps of a small rope model (no position table: models of any context start equal).
TrainOptions small_run(const testing::TempDir& dir, int64_t block_size, int64_t batch_size, int64_t seq_warmup,
                       int64_t batch_warmup) {
  TrainOptions o;
  o.model = {.vocab_size = 0, .block_size = block_size, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0.1f};
  o.model.pos = nn::Positions::rope;
  o.train.data = testing::write_small_corpus(dir / "corpus.txt", 20000);
  o.train.batch_size = batch_size, o.train.max_iters = 12, o.train.warmup_iters = 4;
  o.train.eval_interval = 50, o.train.eval_iters = 2;
  o.train.seq_warmup = seq_warmup, o.train.batch_warmup = batch_warmup;
  o.out_dir = dir / "run";
  o.quiet = true;
  return o;
}

// The weights of runs (block_size, batch_size, seq_warmup, batch_warmup), each trained
// on 2 threads.
std::vector<std::vector<float>> weights_of(const std::vector<std::array<int64_t, 4>>& runs) {
  set_num_threads(2);
  std::vector<std::vector<float>> weights;
  for (const auto& [block, batch, seq, warm] : runs) {
    const testing::TempDir dir("size_warmup");
    Trainer(small_run(dir, block, batch, seq, warm)).run();
    weights.push_back(load_model(dir / "run").model->flat_parameters().to_vector());
  }
  set_num_threads(0);
  return weights;
}

// During its warm-up a model with a context of 64 trains on the windows of 8 tokens a
// model with a context of 8 trains on: the same draws, the same dropout masks, the same
// weights. Without the warm-up it trains on windows of 64 and ends elsewhere.
TEST(SeqWarmup, TrainsOnTheShortWindowsItNames) {
  // Window 8 until step 143 of the warm-up.
  const auto w = weights_of({{8, 4, 0, 0}, {64, 4, 1000, 0}, {64, 4, 0, 0}});
  EXPECT_EQ(w[1], w[0]);
  EXPECT_NE(w[2], w[0]);
}

// Likewise a run with a batch of 32 trains on the 4 windows a run with a batch of 4
// trains on during its warm-up, and on 32 without it.
TEST(BatchWarmup, TrainsOnTheSmallBatchesItNames) {
  // 4 sequences until step 143 of the warm-up.
  const auto w = weights_of({{16, 4, 0, 0}, {16, 32, 0, 1000}, {16, 32, 0, 0}});
  EXPECT_EQ(w[1], w[0]);
  EXPECT_NE(w[2], w[0]);
}

TEST(SeqWarmup, EpochSamplingIsRefused) {
  TrainConfig c;
  c.seq_warmup = 100;
  c.validate();
  c.sampling = Sampling::epoch;
  testing::expect_error([&] { c.validate(); }, {"seq_warmup 100", "needs sampling random", "epoch"});
  c.seq_warmup = -1;
  c.sampling = Sampling::random;
  testing::expect_error([&] { c.validate(); }, {"seq_warmup", ">= 0", "-1"});
}

TEST(BatchWarmup, NegativeIsRefused) {
  TrainConfig c;
  c.batch_warmup = 100;
  c.validate();
  c.sampling = Sampling::epoch;  // the epoch order takes batches of any size
  c.validate();
  c.batch_warmup = -1;
  testing::expect_error([&] { c.validate(); }, {"batch_warmup", ">= 0", "-1"});
}

}  // namespace
}  // namespace folio
