// The pieces of a data-parallel step that overlaps its all-reduce with backward, on
// one process (tests/test_mpi.sh runs them on two ranks): the backward hook reports
// each leaf once, when its gradient is final; the buckets give the gradient that
// DataParallel's own sum and a scale give, bit for bit; and --grad-accum K trains as a
// K times larger batch does.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "data/dataset.h"
#include "io/checkpoint.h"
#include "tests/support.h"
#include "train/data_parallel.h"
#include "train/gradient_buckets.h"
#include "train/trainer.h"

namespace folio {
namespace {

namespace fs = std::filesystem;

nn::GPTConfig small_config() {
  return {.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0.0f,
          .bias = true, .activation = nn::Activation::gelu, .seed = 5};
}

std::vector<int32_t> tokens(int64_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& t : v) t = int32_t(r.below(11));
  return v;
}

std::vector<float> gradient(const nn::GPT& m) {
  const Tensor& flat = m.flat_parameters();
  return {flat.grad_data(), flat.grad_data() + flat.numel()};
}

// a is used by two ops: its gradient is final only after the second (in the walk) has
// run; each leaf is reported once, with the gradient it ends with.
TEST(BackwardHook, ReportsEachLeafOnceWithItsFinalGradient) {
  const std::vector<float> va{1.0f, 2.0f, 3.0f}, vb{4.0f, 5.0f, 6.0f}, vc{0.5f, 0.5f, 0.5f};
  Tensor a = Tensor::from({3}, va), b = Tensor::from({3}, vb), c = Tensor::from({3}, vc);
  for (Tensor* t : {&a, &b, &c}) t->set_requires_grad();
  const Tensor loss = sum(add(mul(mul(a, b), c), a));
  std::map<const TensorImpl*, std::vector<float>> seen;
  loss.backward([&](const TensorImpl& leaf) {
    EXPECT_FALSE(seen.count(&leaf)) << "reported twice";
    const float* g = leaf.grad->data + leaf.grad_offset;
    seen[&leaf] = std::vector<float>(g, g + leaf.shape.numel());
  });
  ASSERT_EQ(seen.size(), 3u);
  for (const Tensor& t : {a, b, c}) EXPECT_EQ(seen.at(t.impl()), t.grad().to_vector());
  EXPECT_EQ(a.grad().to_vector(), (std::vector<float>{3.0f, 3.5f, 4.0f}));  // b * c + 1
}

// The buckets add the shards' gradients and scale them as DataParallel's sum and a
// multiplication after it do: the same floats, for tiny buckets (one parameter each)
// and for one bucket of everything; every bucket leaves during the backward pass.
TEST(GradientBuckets, SameGradientAsTheSumAfterBackward) {
  const int64_t B = 5, T = 8;
  const std::vector<int32_t> ids = tokens(B * T, 1), targets = tokens(B * T, 2);
  for (int64_t bucket_floats : {int64_t(1), int64_t(300), int64_t(1) << 30}) {
    SCOPED_TRACE(::testing::Message() << "buckets of " << bucket_floats << " floats");
    nn::GPT plain(small_config()), bucketed(small_config());
    DataParallel dp_plain(plain, 2), dp_bucketed(bucketed, 2);
    const float scale = 0.375f;
    dp_plain.forward_backward(ids, targets, B, T);
    std::vector<float> want = gradient(plain);
    for (float& g : want) g *= scale;
    GradientBuckets buckets(bucketed.named_parameters(), {dp_bucketed.shard_grad(0), dp_bucketed.shard_grad(1)},
                            bucketed.flat_parameters().numel(), bucket_floats);
    buckets.begin(dp_bucketed.shards_used(B), scale);
    dp_bucketed.forward_backward(ids, targets, B, T, &buckets);
    buckets.finish();
    EXPECT_EQ(gradient(bucketed), want);
    EXPECT_EQ(buckets.ready_during_backward(), buckets.count()) << "a bucket waited for finish()";
    if (bucket_floats == 1) {
      EXPECT_EQ(buckets.count(), int(bucketed.named_parameters().size()));
    }
    // The replica's gradient was handed over and cleared.
    const float* g1 = dp_bucketed.shard_grad(1);
    for (int64_t i = 0; i < bucketed.flat_parameters().numel(); ++i) ASSERT_EQ(g1[i], 0.0f) << i;
  }
}

// Threads inside the ops (no DataParallel): one shard.
TEST(GradientBuckets, OneShardInsideTheOps) {
  const int64_t B = 3, T = 8;
  const std::vector<int32_t> ids = tokens(B * T, 3), targets = tokens(B * T, 4);
  nn::GPT plain(small_config()), bucketed(small_config());
  plain.forward(ids, B, T, targets).loss.backward();
  GradientBuckets buckets(bucketed.named_parameters(), {bucketed.flat_parameters().grad_data()},
                          bucketed.flat_parameters().numel(), 500);
  buckets.begin(1, 1.0f);
  bucketed.forward(ids, B, T, targets).loss.backward([&](const TensorImpl& leaf) { buckets.leaf_ready(0, leaf); });
  buckets.finish();
  EXPECT_EQ(gradient(bucketed), gradient(plain));
  EXPECT_GT(buckets.count(), 2);
  EXPECT_EQ(buckets.ready_during_backward(), buckets.count());
}

// --grad-accum 3 with batches of 2 draws the same 6 windows as one batch of 6 and takes
// the gradient of their mean: the weights agree after 20 steps to float rounding, on
// threads inside the ops and on data-parallel shards.
TEST(GradAccum, TrainsAsTheLargerBatch) {
  for (const bool data_parallel : {false, true}) {
    SCOPED_TRACE(data_parallel ? "data-parallel" : "inside the ops");
    set_num_threads(2);
    const testing::TempDir tmp(data_parallel ? "accum_dp" : "accum_ops");
    std::ifstream in(default_corpus_path(), std::ios::binary);  // data/dataset.h
    std::string text(20000, '\0');
    in.read(text.data(), std::streamsize(text.size()));
    const fs::path& dir = tmp.path;
    std::ofstream(dir / "corpus.txt", std::ios::binary) << text;
    auto run = [&](const char* name, int64_t batch, int64_t accum) {
      TrainOptions o;
      o.model = {.block_size = 16, .n_layer = 1, .n_head = 2, .n_embd = 16, .dropout = 0.0f, .seed = 3};
      o.train.data = (dir / "corpus.txt").string();
      o.train.batch_size = batch;
      o.train.grad_accum = accum;
      o.train.max_iters = 20;
      o.train.warmup_iters = 2;
      o.train.eval_interval = 20;
      o.train.eval_iters = 1;
      o.data_parallel = data_parallel;
      o.out_dir = (dir / name).string();
      o.quiet = true;
      Trainer(o).run();
      return load_model(o.out_dir);
    };
    const ModelCheckpoint big = run("big", 6, 1), accum = run("accum", 2, 3), small = run("small", 2, 1);
    const auto pb = big.model->named_parameters(), pa = accum.model->named_parameters(),
               ps = small.model->named_parameters();
    float worst = 0, apart = 0;  // the largest difference from the big batch: accumulated, and a batch of 2
    for (size_t i = 0; i < pb.size(); ++i)
      for (int64_t k = 0; k < pb[i].second.numel(); ++k) {
        worst = std::max(worst, std::abs(pa[i].second.data()[k] - pb[i].second.data()[k]));
        apart = std::max(apart, std::abs(ps[i].second.data()[k] - pb[i].second.data()[k]));
      }
    EXPECT_LT(worst, 1e-4f);
    EXPECT_GT(apart, 1e-3f) << "a batch of 2 trains as a batch of 6: the comparison shows nothing";
    set_num_threads(0);
  }
}

}  // namespace
}  // namespace folio
