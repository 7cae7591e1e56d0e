// Data-parallel training: one replica per thread must give the gradient of the whole
// batch, as the model alone does, and share the model's weights.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <thread>

#include "base/error.h"
#include "autograd/kernels/matmul.h"
#include "autograd/parallel.h"
#include "autograd/pool.h"
#include "train/adamw.h"
#include "train/data_parallel.h"

namespace folio {
namespace {

nn::GPTConfig small_config(float dropout = 0.0f) {
  return {.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = dropout,
          .bias = true, .activation = nn::Activation::gelu, .seed = 5};
}

struct Batch {
  std::vector<int32_t> ids, targets;
};
Batch batch(int64_t B, int64_t T, uint64_t seed) {
  Rng r(seed);
  Batch b{std::vector<int32_t>(size_t(B * T)), std::vector<int32_t>(size_t(B * T))};
  for (auto& v : b.ids) v = int32_t(r.below(11));
  for (auto& v : b.targets) v = int32_t(r.below(11));
  return b;
}

std::vector<float> gradient(const nn::GPT& m) {
  const Tensor& flat = m.flat_parameters();
  return {flat.grad_data(), flat.grad_data() + flat.numel()};
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  float scale = 0.0f;
  for (float w : want) scale = std::max(scale, std::abs(w));
  ASSERT_GT(scale, 0.0f);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol * scale) << "element " << i;
}

// Shard counts that divide the batch evenly and unevenly, and more shards than sequences.
TEST(DataParallel, SameLossAndGradientAsTheModelAlone) {
  for (auto [B, shards] : {std::pair{4, 2}, {5, 2}, {5, 3}, {1, 2}, {3, 1}}) {
    SCOPED_TRACE(testing::Message() << "B " << B << ", shards " << shards);
    const int64_t T = 8;
    const Batch b = batch(B, T, 9);
    nn::GPT alone(small_config()), split(small_config());
    const float want = alone.forward(b.ids, B, T, b.targets).loss.item();
    alone.forward(b.ids, B, T, b.targets).loss.backward();
    DataParallel dp(split, shards);
    EXPECT_NEAR(dp.forward_backward(b.ids, b.targets, B, T), want, 1e-5f);
    expect_close(gradient(split), gradient(alone), 1e-5f);
    // The replicas' gradients were handed over and cleared: a second step adds the same again.
    dp.forward_backward(b.ids, b.targets, B, T);
    std::vector<float> twice = gradient(alone);
    for (float& g : twice) g *= 2.0f;
    expect_close(gradient(split), twice, 1e-5f);
  }
}

TEST(DataParallel, ReplicasSeeTheModelsUpdatedWeights) {
  const int64_t B = 4, T = 8;
  const Batch b = batch(B, T, 3);
  nn::GPT alone(small_config()), split(small_config());
  DataParallel dp(split, 2);
  AdamW opt_alone(alone.named_parameters(), {}), opt_split(split.named_parameters(), {});
  for (int step = 0; step < 3; ++step) {
    alone.forward(b.ids, B, T, b.targets).loss.backward();
    dp.forward_backward(b.ids, b.targets, B, T);
    opt_alone.step(1e-2f);
    opt_split.step(1e-2f);
    alone.zero_grad();
    split.zero_grad();
  }
  const float want = alone.forward(b.ids, B, T, b.targets).loss.item();
  EXPECT_NEAR(dp.forward_backward(b.ids, b.targets, B, T), want, 1e-4f);
}

TEST(DataParallel, DropoutIsReproducibleAndDiffersAcrossShards) {
  const int64_t B = 4, T = 8;
  const Batch b = batch(B, T, 4);
  auto run = [&](int shards) {
    nn::GPT m(small_config(0.3f));
    DataParallel dp(m, shards);
    const float loss = dp.forward_backward(b.ids, b.targets, B, T);
    return std::pair{loss, gradient(m)};
  };
  const auto [loss1, grad1] = run(2);
  const auto [loss2, grad2] = run(2);
  EXPECT_EQ(loss1, loss2);
  EXPECT_EQ(grad1, grad2);
  // The protocol: one word from the model's generator seeds replica 1, then shard 0
  // runs on the model with what is left. Same sequence in both shards, different masks.
  nn::GPT m(small_config(0.3f));
  const Batch one = batch(1, T, 4);
  Batch twin = one;
  twin.ids.insert(twin.ids.end(), one.ids.begin(), one.ids.end());
  twin.targets.insert(twin.targets.end(), one.targets.begin(), one.targets.end());
  Rng expected = m.dropout_rng();
  const uint64_t replica_seed = expected.next_u64();
  DataParallel dp(m, 2);
  const float both = dp.forward_backward(twin.ids, twin.targets, 2, T);
  nn::GPT shard0(small_config(0.3f)), shard1(small_config(0.3f));
  shard0.dropout_rng().set_state(expected.state());
  shard1.dropout_rng().reseed(replica_seed);
  const float l0 = shard0.forward(one.ids, 1, T, one.targets).loss.item();
  const float l1 = shard1.forward(one.ids, 1, T, one.targets).loss.item();
  EXPECT_NE(l0, l1);
  EXPECT_NEAR(both, 0.5f * (l0 + l1), 1e-5f);
  // In eval mode (no dropout) the replicas follow the model: both shards agree.
  m.eval();
  EXPECT_NEAR(dp.forward_backward(twin.ids, twin.targets, 2, T),
              nn::GPT(small_config(0.0f)).forward(one.ids, 1, T, one.targets).loss.item(), 1e-5f);
}

// An evaluation's loss is the model's alone, masked targets or not, with no dropout in
// eval mode and no graph; `weights` evaluates another model's.
TEST(DataParallel, EvaluatesAsTheModelAlone) {
  for (auto [B, shards] : {std::pair{4, 2}, {5, 3}, {1, 2}}) {
    SCOPED_TRACE(testing::Message() << "B " << B << ", shards " << shards);
    const int64_t T = 8;
    Batch b = batch(B, T, 11);
    for (size_t i = 0; i < b.targets.size(); i += 3) b.targets[i] = kNoTarget;  // a chat batch's prompts
    nn::GPT alone(small_config(0.3f)), split(small_config(0.3f));
    alone.eval(), split.eval();
    DataParallel dp(split, shards);
    EXPECT_NEAR(dp.evaluate(b.ids, b.targets, B, T), alone.forward(b.ids, B, T, b.targets).loss.item(), 1e-5f);
    for (float g : gradient(split)) ASSERT_EQ(g, 0.0f);
    nn::GPTConfig other_config = small_config();
    other_config.seed = 6;
    const nn::GPT other(other_config);
    EXPECT_NEAR(dp.evaluate(b.ids, b.targets, B, T, &other), other.forward(b.ids, B, T, b.targets).loss.item(),
                1e-5f);
  }
}

// After a step, an evaluation of a batch of the same size takes no buffer the pool does
// not hold already: each shard's forward asks for the sizes the step's did, on the same
// thread. (The whole batch through the model alone asks for others: GPT-2 small's run
// at 2 x 1024 took ~1 GB more.)
TEST(DataParallel, EvaluatesInTheStepsBuffers) {
  const int64_t B = 4, T = 8;
  const Batch b = batch(B, T, 12);
  nn::GPT m(small_config());
  DataParallel dp(m, 2);
  dp.forward_backward(b.ids, b.targets, B, T);
  m.eval();
  const uint64_t fresh = pool::stats().fresh;
  dp.evaluate(b.ids, b.targets, B, T);
  dp.evaluate(b.ids, b.targets, B, T, &m);
  EXPECT_EQ(pool::stats().fresh, fresh);
}

TEST(DataParallel, BadInputIsAnError) {
  nn::GPT m(small_config());
  EXPECT_THROW(DataParallel(m, 0), Error);
  DataParallel dp(m, 2);
  const Batch b = batch(2, 8, 1);
  EXPECT_THROW(dp.forward_backward(b.ids, b.targets, 3, 8), Error);
  std::vector<int32_t> bad = b.ids;
  bad[5] = 99;  // outside the vocabulary: the shard's error reaches the caller
  EXPECT_THROW(dp.forward_backward(bad, b.targets, 2, 8), Error);
  EXPECT_THROW(dp.evaluate(b.ids, b.targets, 3, 8), Error);
  EXPECT_THROW(dp.evaluate(bad, b.targets, 2, 8), Error);
}

TEST(DataParallel, LeavesTheThreadCountAlone) {
  const int before = num_threads();
  nn::GPT m(small_config());
  DataParallel dp(m, 2);
  const Batch b = batch(2, 8, 1);
  dp.forward_backward(b.ids, b.targets, 2, 8);
  EXPECT_EQ(num_threads(), before);
}

// The matmul primitive cache is per thread: concurrent products must not share state.
TEST(DataParallel, MatmulsFromSeveralThreadsAtOnce) {
  kernels::Gemm g;
  g.M = 37, g.N = 29, g.K = 41;
  Rng r(2);
  const Tensor a = Tensor::randn({g.M, g.K}, r), bm = Tensor::randn({g.K, g.N}, r);
  Tensor want = Tensor::empty({g.M, g.N});
  kernels::matmul_reference(g, a.data(), bm.data(), want.data());
  std::vector<Tensor> outs(4);
  for (auto& o : outs) o = Tensor::empty({g.M, g.N});
#pragma omp parallel for num_threads(4)
  for (int t = 0; t < 4; ++t)
    for (int rep = 0; rep < 50; ++rep) kernels::matmul(g, a.data(), bm.data(), outs[size_t(t)].data());
  for (const Tensor& o : outs)
    for (int64_t i = 0; i < o.numel(); ++i) ASSERT_NEAR(o.data()[i], want.data()[i], 1e-4f);
}

}  // namespace
}  // namespace folio
