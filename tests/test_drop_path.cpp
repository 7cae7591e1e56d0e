// Stochastic depth (--drop-path): the op that drops whole rows against a plain loop,
// its rate, the depth schedule, a model that is the one without it outside training,
// and each sequence of a training batch skipping exactly the branches its draws say.
#include <gtest/gtest.h>

#include <set>

#include "autograd/kernels/dropout_mask.h"
#include "nn/transformer.h"
#include "tests/support.h"

namespace folio {
namespace {

// drop_rows against its definition: row b is x[b] / (1 - p) when element b of the
// draw's dropout mask is kept, else zeros; its gradient is the same factor times the
// output's.
TEST(DropRows, MatchesAPlainLoop) {
  const float p = 0.4f;
  const int64_t B = 9, row = 3 * 4;
  Rng r(2);
  Tensor x = Tensor::randn({B, 3, 4}, r).set_requires_grad();
  Rng draws(11);
  const Tensor y = drop_rows(x, p, true, draws);  // (B, 3, 4)
  const Tensor w = Tensor::randn(y.shape(), r);   // (B, 3, 4) a fixed weighting of y
  sum(mul(y, w)).backward();

  const kernels::DropoutMask mask(p, Rng(11).next_u64());
  int kept = 0;
  for (int64_t b = 0; b < B; ++b) {
    const float factor = mask.kept(b) ? 1.0f / (1.0f - p) : 0.0f;
    kept += mask.kept(b);
    for (int64_t i = b * row; i < (b + 1) * row; ++i) {
      ASSERT_FLOAT_EQ(y.data()[i], x.data()[i] * factor) << "row " << b;
      ASSERT_FLOAT_EQ(x.grad().data()[i], w.data()[i] * factor) << "row " << b;
    }
  }
  EXPECT_GT(kept, 0);  // both fates occur in this draw
  EXPECT_LT(kept, B);
}

TEST(DropRows, DropsAboutPOfTheRows) {
  const float p = 0.3f;
  Rng draws(5);
  const std::vector<float> y = drop_rows(Tensor::ones({20000, 2}), p, true, draws).to_vector();  // (20000, 2)
  int64_t dropped = 0;
  for (size_t b = 0; b < y.size(); b += 2) {
    ASSERT_EQ(y[b], y[b + 1]) << "row " << b / 2 << " split";
    dropped += y[b] == 0.0f;
  }
  EXPECT_NEAR(double(dropped) / 20000.0, p, 0.01);
}

// Outside training, or at p 0, the input itself, and no draw: every later mask of a
// run stays where it was.
TEST(DropRows, IdentityWithoutADrawWhenOffOrZero) {
  Rng r(1), draws(3);
  const Tensor x = Tensor::randn({4, 5}, r);
  const Rng::State before = draws.state();
  EXPECT_TRUE(drop_rows(x, 0.5f, false, draws).same(x));
  EXPECT_TRUE(drop_rows(x, 0.0f, true, draws).same(x));
  EXPECT_EQ(draws.state(), before);
  testing::expect_error([&] { drop_rows(x, 1.0f, true, draws); }, {"[drop_rows]", "[0, 1)"});
  testing::expect_error([&] { drop_rows(Tensor::scalar(1.0f), 0.5f, true, draws); }, {"[drop_rows]", "rows"});
}

nn::GPTConfig small(float drop_path) {
  return {.vocab_size = 7, .block_size = 6, .n_layer = 1, .n_head = 2, .n_embd = 8, .pos = nn::Positions::rope,
          .drop_path = drop_path};
}

TEST(DropPath, DeeperBlocksSkipMore) {
  nn::GPTConfig c = small(0.3f);
  c.n_layer = 3;
  const nn::GPT gpt(c);
  for (size_t l = 0; l < 3; ++l) EXPECT_FLOAT_EQ(gpt.blocks[l]->drop_path->p(), 0.1f * float(l + 1)) << l;
  c.drop_path = 0.0f;
  for (const auto& block : nn::GPT(c).blocks) EXPECT_EQ(block->drop_path->p(), 0.0f);
}

// It adds no parameter and draws none at initialisation, and it is off outside
// training: the model evaluates as the one without it, bit for bit.
TEST(DropPath, OutsideTrainingTheModelIsTheOneWithout) {
  nn::GPTConfig c = small(0.5f);
  c.n_layer = 2;
  nn::GPT with(c);
  c.drop_path = 0.0f;
  nn::GPT without(c);
  ASSERT_EQ(with.flat_parameters().to_vector(), without.flat_parameters().to_vector());
  const std::vector<int32_t>& ids = testing::kIds2x6;  // (2, 6)
  NoGradGuard no_grad;
  const std::vector<float> expected = without.forward(ids, 2, 6).logits.to_vector();
  EXPECT_NE(with.forward(ids, 2, 6).logits.to_vector(), expected);  // training: some branch dropped
  with.eval();
  EXPECT_EQ(with.forward(ids, 2, 6).logits.to_vector(), expected);
}

// In training each sequence skips each branch on its own draw: the batch's logits are,
// row by row, those of the block computed with that row's two factors (0 or 1/(1-p)).
// The block's draws come from the model's generator, the attention branch's first.
TEST(DropPath, EachSequenceSkipsTheBranchesItsDrawsSay) {
  const nn::GPTConfig c = small(0.5f);
  nn::GPT gpt(c);
  Rng init(4);  // attention far from uniform, branches that matter
  for (const Tensor& p : gpt.parameters())
    for (int64_t i = 0; i < p.numel(); ++i) p.data()[i] = 0.5f * init.normal();
  const int64_t B = 8, T = 5;
  std::vector<int32_t> ids(B * T);  // (B, T)
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 5 + i / 3) % 7);
  Rng draws = gpt.dropout_rng();
  const kernels::DropoutMask attn_mask(0.5f, draws.next_u64()), ffwd_mask(0.5f, draws.next_u64());
  NoGradGuard no_grad;
  const Tensor logits = gpt.forward(ids, B, T).logits;  // (B, T, V)

  const nn::Block& block = *gpt.blocks[0];
  std::set<std::pair<bool, bool>> seen;
  for (int64_t b = 0; b < B; ++b) {
    const float fa = attn_mask.kept(b) ? 2.0f : 0.0f, ff = ffwd_mask.kept(b) ? 2.0f : 0.0f;
    seen.insert({fa > 0, ff > 0});
    const std::span<const int32_t> row(ids.data() + b * T, size_t(T));
    const Tensor x = gpt.token_embedding->forward(row, {1, T});  // (1, T, C)
    const Tensor h = add(x, scale(block.attn->forward(block.ln1->forward(x)), fa));
    const Tensor y = add(h, scale(block.ffwd->forward(block.ln2->forward(h)), ff));
    const Tensor expected = gpt.lm_head->forward(gpt.ln_f->forward(y));  // (1, T, V)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t v = 0; v < c.vocab_size; ++v)
        ASSERT_NEAR(logits.at({b, t, v}), expected.at({0, t, v}), 1e-5f) << "sequence " << b << " position " << t;
  }
  EXPECT_GE(seen.size(), 3u);  // kept and dropped branches, in several combinations
}

}  // namespace
}  // namespace folio
