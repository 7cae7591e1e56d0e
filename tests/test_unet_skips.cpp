// U-net skips (--unet-skips): the pairing of the first blocks with the last, written
// out by hand, the gates' place and start, and a config that has nothing to pair.
// The gradient check, the cached forward and the parameter count run with every
// option in test_model_options.cpp; the decoder in test_decoder.cpp.
#include <gtest/gtest.h>

#include <tuple>

#include "nn/transformer.h"
#include "tests/support.h"

namespace folio::nn {
namespace {

GPTConfig five_blocks() {  // rope: the embedding is the token table alone
  GPTConfig c;
  c.vocab_size = 7, c.block_size = 6, c.n_layer = 5, c.n_head = 2, c.n_embd = 8, c.pos = Positions::rope;
  return c;
}

// Five blocks: blocks 0 and 1 keep their outputs, block 2 (the middle) takes none,
// block 3 takes block 1's through gate 0 and block 4 block 0's through gate 1.
TEST(UNetSkips, PairTheFirstBlocksWithTheLastInReverse) {
  GPTConfig c = five_blocks();
  c.unet_skips = true;
  const GPT gpt(c);
  for (int64_t l : {0, 1, 2}) EXPECT_EQ(c.skip_into(l), std::nullopt) << l;
  for (const auto& [layer, from, gate] : {std::tuple{3, 1, 0}, std::tuple{4, 0, 1}}) {
    const auto skip = c.skip_into(layer);
    ASSERT_TRUE(skip) << layer;
    EXPECT_EQ(skip->from, from) << layer;
    EXPECT_EQ(skip->gate, gate) << layer;
  }
  Rng r(11);  // gates other than 1, and different from each other
  for (const Tensor& p : gpt.parameters())
    for (int64_t i = 0; i < p.numel(); ++i) p.data()[i] = 0.3f * r.normal();
  const std::vector<int32_t> ids{1, 3, 5, 0, 6, 2};
  NoGradGuard no_grad;
  const auto& b = gpt.blocks;
  const Tensor& g0 = gpt.skip_gates->gate[0];
  const Tensor& g1 = gpt.skip_gates->gate[1];
  const Tensor out0 = b[0]->forward(gpt.token_embedding->forward(ids, {1, 6}));  // (1, 6, C)
  const Tensor out1 = b[1]->forward(out0);                                     // (1, 6, C)
  const Tensor out3 = b[3]->forward(add(b[2]->forward(out1), mul(out1, g0)));  // (1, 6, C)
  const Tensor out4 = b[4]->forward(add(out3, mul(out0, g1)));                 // (1, 6, C)
  const Tensor want = gpt.lm_head->forward(gpt.ln_f->forward(out4));  // (1, 6, V)
  EXPECT_EQ(gpt.forward(ids, 1, 6).logits.to_vector(), want.to_vector());
}

// The gates come after every other parameter, at 1, and draw nothing: every other
// weight starts as it would without them.
TEST(UNetSkips, GatesComeLastAtOne) {
  GPTConfig c = five_blocks();
  const GPT plain(c);
  c.unet_skips = true;
  const GPT skips(c);
  const auto a = plain.named_parameters(), b = skips.named_parameters();
  ASSERT_EQ(b.size(), a.size() + 2);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i].first, a[i].first);
    EXPECT_EQ(b[i].second.to_vector(), a[i].second.to_vector()) << a[i].first;
  }
  EXPECT_EQ(b[a.size()].first, "skip_gates.0");
  EXPECT_EQ(b[a.size() + 1].second.to_vector(), std::vector<float>(size_t(c.n_embd), 1.0f));
  EXPECT_EQ(c.parameter_count(), skips.num_parameters());
}

TEST(UNetSkips, OneBlockHasNothingToPair) {
  GPTConfig c = five_blocks();
  c.unet_skips = true, c.n_layer = 1;
  folio::testing::expect_error([&] { c.validate(); }, {"unet_skips", "n_layer 1", "at least 2"});
  c.n_layer = 2;  // the smallest pair: block 1 takes block 0's output
  EXPECT_EQ(c.skip_into(0), std::nullopt);
  ASSERT_TRUE(c.skip_into(1));
  EXPECT_EQ(c.skip_into(1)->from, 0);
  c.n_layer = 4;  // an even count: block 2 takes block 1's, block 3 block 0's
  ASSERT_TRUE(c.skip_into(2) && c.skip_into(3));
  EXPECT_EQ(c.skip_into(2)->from, 1);
  EXPECT_EQ(c.skip_into(3)->from, 0);
  EXPECT_EQ(c.skip_into(3)->gate, 1);
}

}  // namespace
}  // namespace folio::nn
