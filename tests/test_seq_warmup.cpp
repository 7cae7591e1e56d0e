// Sequence-length warm-up (--seq-warmup): the window of each step, and a run that
// trains on the short windows it names. Exact resume in the middle of a warm-up runs
// in test_train.cpp (TrainerResume).
#include <gtest/gtest.h>

#include <set>

#include "autograd/parallel.h"
#include "tests/support.h"
#include "train/seq_warmup.h"
#include "train/trainer.h"

namespace folio {
namespace {

TEST(SeqWarmup, WindowGrowsByStagesToTheContext) {
  // 8 + 56 * step / 100, rounded down to a multiple of 8.
  EXPECT_EQ(window_length(0, 64, 100), 8);
  EXPECT_EQ(window_length(14, 64, 100), 8);   // 15.84
  EXPECT_EQ(window_length(15, 64, 100), 16);  // 16.4
  EXPECT_EQ(window_length(50, 64, 100), 32);  // 36
  EXPECT_EQ(window_length(99, 64, 100), 56);  // 63.44
  EXPECT_EQ(window_length(100, 64, 100), 64);
  EXPECT_EQ(window_length(5000, 64, 100), 64);
  EXPECT_EQ(window_length(0, 64, 0), 64);  // off
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
  for (int64_t block : {9, 64, 100, 300, 1024, 65536}) {
    std::set<int64_t> lengths;
    int64_t before = 0;
    for (int64_t step = 0; step <= 1200; ++step) {
      const int64_t t = window_length(step, block, 1111);
      EXPECT_GE(t, before) << block;  // never shrinks
      EXPECT_TRUE(t == block || (t >= 8 && t % seq_warmup_stage(block) == 0)) << block << " " << t;
      lengths.insert(before = t);
    }
    EXPECT_EQ(before, block);
    EXPECT_LE(lengths.size(), 9u) << block;
  }
}

TrainOptions rope_run(const testing::TempDir& dir, int64_t block_size, int64_t seq_warmup) {
  TrainOptions o;
  o.model = {.vocab_size = 0, .block_size = block_size, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0.1f};
  o.model.pos = nn::Positions::rope;  // no position table: the contexts' models start equal
  o.train.data = testing::write_small_corpus(dir / "corpus.txt", 20000);
  o.train.batch_size = 4, o.train.max_iters = 12, o.train.warmup_iters = 4;
  o.train.eval_interval = 50, o.train.eval_iters = 2;
  o.train.seq_warmup = seq_warmup;
  o.out_dir = dir / "run";
  o.quiet = true;
  return o;
}

std::vector<float> weights_of(const std::string& run_dir) {
  return load_model(run_dir).model->flat_parameters().to_vector();
}

// During its warm-up a model with a context of 64 trains on the windows of 8 tokens a
// model with a context of 8 trains on: the same draws, the same dropout masks, the same
// weights. Without the warm-up it trains on windows of 64 and ends elsewhere.
TEST(SeqWarmup, TrainsOnTheShortWindowsItNames) {
  set_num_threads(2);
  const testing::TempDir short_dir("seq_short"), warm_dir("seq_warm"), full_dir("seq_full");
  Trainer(rope_run(short_dir, 8, 0)).run();
  Trainer(rope_run(warm_dir, 64, 1000)).run();  // window 8 until step 143
  Trainer(rope_run(full_dir, 64, 0)).run();
  set_num_threads(0);
  const std::vector<float> short_context = weights_of(short_dir / "run");
  EXPECT_EQ(weights_of(warm_dir / "run"), short_context);
  EXPECT_NE(weights_of(full_dir / "run"), short_context);
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

}  // namespace
}  // namespace folio
