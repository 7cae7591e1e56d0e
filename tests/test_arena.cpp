// Parameters live in one arena from construction (nn/arena.h): every module's
// parameters are views of its arena's weights and gradients, back to back in
// named_parameters() order, and a replica shares the weights but not the gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <typeinfo>

#include "base/error.h"
#include "nn/transformer.h"
#include "train/data_parallel.h"

namespace folio::nn {
namespace {

GPTConfig small_config() {
  return {.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16, .seed = 5};
}

// m's parameters tile `flat` (weights and gradients) from its first element, in order.
void expect_views_in_order(const Module& m, const Tensor& flat) {
  int64_t offset = 0;
  for (const auto& [name, p] : m.named_parameters()) {
    ASSERT_TRUE(p.is_leaf() && p.requires_grad()) << name;
    EXPECT_EQ(p.data(), flat.data() + offset) << name;
    EXPECT_EQ(p.grad_data(), flat.grad_data() + offset) << name;
    offset += p.numel();
  }
  EXPECT_EQ(offset, flat.numel());
}

TEST(Arena, ParametersAreViewsInRegistrationOrder) {
  Rng init(1);
  auto check = [&]<class M>(int64_t count, auto... args) {
    Arena arena(count, init);
    const M m(args..., arena);
    SCOPED_TRACE(typeid(M).name());
    expect_views_in_order(m, arena.flat());
  };
  check.operator()<Linear>(Linear::parameter_count(4, 3, true), 4, 3, true);
  check.operator()<Head>(Head::parameter_count(6, 4), 6, 4, 8, 0.0f);
  check.operator()<MultiHead>(MultiHead::parameter_count(6, 3, 2, true), 6, 3, 2, 8, 0.0f, true);
  check.operator()<Block>(Block::parameter_count(8, 2, true), 8, 2, 8, 0.0f, true, Activation::gelu);
  const GPT gpt(small_config());
  expect_views_in_order(gpt, gpt.flat_parameters());
  EXPECT_EQ(gpt.flat_parameters().numel(), small_config().parameter_count());
  EXPECT_EQ(grad_runs(gpt.parameters()).size(), 1u);  // clipping and zero_grad: one loop
}

// Built standalone (from an Rng), a module owns its arena: the same layout, and the
// values the recipe draws, in its order (weight then bias, as Tensor::randn would).
TEST(Arena, StandaloneModulesOwnTheirArena) {
  Rng init(3);
  const Block block(8, 2, 8, 0.0f, true, Activation::relu, init);
  const std::vector<Tensor> ps = block.parameters();
  expect_views_in_order(block, ps[0].alias(0, {block.num_parameters()}));
  EXPECT_EQ(block.num_parameters(), Block::parameter_count(8, 2, true));

  Rng a(4), b(4);
  const Linear lin(5, 2, true, a);
  EXPECT_EQ(lin.weight.to_vector(), Tensor::randn({2, 5}, b, kInitStd).to_vector());
  EXPECT_EQ(lin.bias.to_vector(), std::vector<float>(2, 0.0f));
}

TEST(Arena, ATooSmallArenaIsAnError) {
  Rng init(1);
  EXPECT_THROW(Linear(4, 3, true, Arena(Linear::parameter_count(4, 3, false), init)), Error);
  const GPT model(small_config());
  GPTConfig other = small_config();
  other.n_layer = 3;
  EXPECT_THROW(GPT(other, Arena::sharing(model.flat_parameters())), Error);
}

// A replica reads and writes the model's weights (the same memory) and accumulates
// into gradients of its own.
TEST(Arena, ReplicaSharesWeightsNotGradients) {
  const GPT model(small_config());
  const GPT replica(small_config(), Arena::sharing(model.flat_parameters()));
  const NamedParameters mine = replica.named_parameters(), theirs = model.named_parameters();
  ASSERT_EQ(mine.size(), theirs.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    EXPECT_EQ(mine[i].first, theirs[i].first);
    EXPECT_EQ(mine[i].second.data(), theirs[i].second.data()) << mine[i].first;
    EXPECT_NE(mine[i].second.grad_data(), theirs[i].second.grad_data()) << mine[i].first;
  }
  expect_views_in_order(replica, replica.flat_parameters());
  EXPECT_EQ(replica.flat_parameters().data(), model.flat_parameters().data());

  const std::vector<int32_t> ids{1, 2, 3, 4}, targets{2, 3, 4, 5};
  replica.forward(ids, 1, 4, targets).loss.backward();
  const Tensor& flat = replica.flat_parameters();
  const float* g = model.flat_parameters().grad_data();
  float replica_sum = 0.0f;
  for (int64_t i = 0; i < flat.numel(); ++i) {
    ASSERT_EQ(g[i], 0.0f) << "the replica's backward wrote the model's gradient at " << i;
    replica_sum += std::abs(flat.grad_data()[i]);
  }
  EXPECT_GT(replica_sum, 0.0f);
}

// Building a replica neither draws initial values over the shared weights nor counts
// as a write: a graph the model recorded before still runs backward.
TEST(Arena, BuildingAReplicaDoesNotChangeTheWeights) {
  GPT model(small_config());
  for (const Tensor& p : model.parameters())  // not the values a fresh GPT of this seed has
    for (int64_t i = 0; i < p.numel(); ++i) p.data()[i] = 0.5f + 0.001f * float(i % 7);
  const std::vector<float> before = model.flat_parameters().to_vector();
  const uint64_t version = model.flat_parameters().version();
  const std::vector<int32_t> ids{1, 2, 3, 4}, targets{2, 3, 4, 5};
  const Tensor loss = model.forward(ids, 1, 4, targets).loss;

  const GPT replica(small_config(), Arena::sharing(model.flat_parameters()));
  DataParallel dp(model, 3);
  EXPECT_EQ(model.flat_parameters().to_vector(), before);
  EXPECT_EQ(model.flat_parameters().version(), version);
  EXPECT_NO_THROW(loss.backward());
}

// A model about to be loaded draws nothing: its weights start as zeros, views in
// order like any other's, and are the loaded values once written.
TEST(Arena, AModelToBeLoadedStartsAtZeroWithItsViewsInOrder) {
  const GPT model(small_config(), Arena::to_be_loaded(small_config().parameter_count()));
  expect_views_in_order(model, model.flat_parameters());
  for (const float w : model.flat_parameters().to_vector()) ASSERT_EQ(w, 0.0f);
}

}  // namespace
}  // namespace folio::nn
