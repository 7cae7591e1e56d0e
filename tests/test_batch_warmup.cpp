// Batch-size warm-up (--batch-warmup): the batch of each step, and a run that trains on
// the small batches it names. Exact resume in the middle of a warm-up runs in
// test_train.cpp (TrainerResume), and on two ranks in test_mpi.sh.
#include <gtest/gtest.h>

#include <set>

#include "autograd/parallel.h"
#include "tests/support.h"
#include "train/batch_warmup.h"
#include "train/trainer.h"

namespace folio {
namespace {

TEST(BatchWarmup, BatchGrowsByStagesToTheBatchSize) {
  // 4 + 28 * step / 100, rounded down to a multiple of 4.
  EXPECT_EQ(batch_size_at(0, 32, 100), 4);
  EXPECT_EQ(batch_size_at(14, 32, 100), 4);   // 7.92
  EXPECT_EQ(batch_size_at(15, 32, 100), 8);   // 8.2
  EXPECT_EQ(batch_size_at(50, 32, 100), 16);  // 18
  EXPECT_EQ(batch_size_at(99, 32, 100), 28);  // 31.72
  EXPECT_EQ(batch_size_at(100, 32, 100), 32);
  EXPECT_EQ(batch_size_at(5000, 32, 100), 32);
  EXPECT_EQ(batch_size_at(0, 32, 0), 32);  // off
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
  for (int64_t batch : {1, 3, 8, 9, 12, 15, 32, 100, 1000}) {
    std::set<int64_t> sizes;
    int64_t before = 0;
    for (int64_t step = 0; step <= 1200; ++step) {
      const int64_t b = batch_size_at(step, batch, 1111);
      EXPECT_GE(b, before) << batch;  // never shrinks
      EXPECT_TRUE(b == batch || (b >= 1 && b % batch_warmup_stage(batch) == 0)) << batch << " " << b;
      sizes.insert(before = b);
    }
    EXPECT_EQ(before, batch);
    EXPECT_LE(sizes.size(), 9u) << batch;
  }
}

TrainOptions small_run(const testing::TempDir& dir, int64_t batch_size, int64_t batch_warmup) {
  TrainOptions o;
  o.model = {.vocab_size = 0, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0.1f};
  o.train.data = testing::write_small_corpus(dir / "corpus.txt", 20000);
  o.train.batch_size = batch_size, o.train.max_iters = 12, o.train.warmup_iters = 4;
  o.train.eval_interval = 50, o.train.eval_iters = 2;
  o.train.batch_warmup = batch_warmup;
  o.out_dir = dir / "run";
  o.quiet = true;
  return o;
}

std::vector<float> weights_of(const std::string& run_dir) {
  return load_model(run_dir).model->flat_parameters().to_vector();
}

// During its warm-up a run with a batch of 32 trains on the 4 windows a run with a batch
// of 4 trains on: the same draws, the same dropout masks, the same weights. Without the
// warm-up it trains on 32 and ends elsewhere.
TEST(BatchWarmup, TrainsOnTheSmallBatchesItNames) {
  set_num_threads(2);
  const testing::TempDir small_dir("batch_small"), warm_dir("batch_warm"), full_dir("batch_full");
  Trainer(small_run(small_dir, 4, 0)).run();
  Trainer(small_run(warm_dir, 32, 1000)).run();  // 4 sequences until step 143
  Trainer(small_run(full_dir, 32, 0)).run();
  set_num_threads(0);
  const std::vector<float> small_batch = weights_of(small_dir / "run");
  EXPECT_EQ(weights_of(warm_dir / "run"), small_batch);
  EXPECT_NE(weights_of(full_dir / "run"), small_batch);
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
