// Dropout in chosen places (--dropout-at): the rate at each place, the draws a
// training step makes, the branches' dropout computed by hand, and no effect outside
// training.
#include <gtest/gtest.h>

#include "autograd/kernels/dropout_mask.h"
#include "nn/transformer.h"
#include "tests/support.h"

namespace folio {
namespace {

using nn::DropoutAt;

constexpr float kP = 0.3f;

nn::GPTConfig config(DropoutAt at, int64_t n_layer = 2) {
  return {.vocab_size = 7, .block_size = 6, .n_layer = n_layer, .n_head = 2, .n_embd = 8, .dropout = kP,
          .pos = nn::Positions::rope, .dropout_at = at};
}

enum class Place { embedding, weights, branch };

// The GPT's Dropout modules by name: "dropout" on the embedding's output;
// blocks.l.attn.attn_dropout (the fused attention's) and blocks.l.attn.heads.h.dropout
// (the per-head path's) on the attention weights; blocks.l.attn.dropout and
// blocks.l.ffwd.dropout on the branches' outputs.
Place place_of(const std::string& name) {
  if (name == "dropout") return Place::embedding;
  if (name.ends_with(".attn_dropout") || name.find(".heads.") != std::string::npos) return Place::weights;
  return Place::branch;
}

bool applies(DropoutAt at, Place place) {
  if (at == DropoutAt::all) return true;
  return at == DropoutAt::residual ? place == Place::branch : place == Place::weights;
}

TEST(DropoutAt, EachPlaceHasTheRateTheOptionGivesIt) {
  for (DropoutAt at : {DropoutAt::all, DropoutAt::residual, DropoutAt::attention}) {
    SCOPED_TRACE(nn::to_string(at));
    const nn::GPT gpt(config(at));
    int places[3] = {0, 0, 0};
    for (const auto& [name, module] : gpt.named_modules()) {
      const auto* d = dynamic_cast<const nn::Dropout*>(module);
      if (!d) continue;
      const Place place = place_of(name);
      ++places[int(place)];
      EXPECT_EQ(d->p(), applies(at, place) ? kP : 0.0f) << name;
    }
    EXPECT_EQ(places[int(Place::embedding)], 1);
    EXPECT_EQ(places[int(Place::weights)], 2 * (2 + 1));  // per block: 2 heads' and the fused op's
    EXPECT_EQ(places[int(Place::branch)], 2 * 2);
  }
}

// A training forward draws once per place that drops (a place at p 0 draws nothing):
// with 2 blocks, the embedding and 3 places a block; the 2 branches a block; the
// weights once a block.
TEST(DropoutAt, ATrainingStepDrawsOncePerPlaceThatDrops) {
  const std::vector<int32_t>& ids = testing::kIds2x6;  // (2, 6)
  for (auto [at, draws] : {std::pair{DropoutAt::all, 7}, {DropoutAt::residual, 4}, {DropoutAt::attention, 2}}) {
    SCOPED_TRACE(nn::to_string(at));
    nn::GPT gpt(config(at));
    Rng replay = gpt.dropout_rng();
    NoGradGuard no_grad;
    gpt.forward(ids, 2, 6);
    int n = 0;
    while (replay.state() != gpt.dropout_rng().state() && n < 100) replay.next_u64(), ++n;
    EXPECT_EQ(n, draws);
  }
}

// With residual, a block computes x + mask_a * attn(ln1(x)), then h + mask_f *
// ffwd(ln2(h)), each mask an elementwise dropout of its own draw (the attention
// branch's first), and the attention weights are left whole.
TEST(DropoutAt, ResidualDropsOnlyTheBranchesOutputs) {
  nn::GPT gpt(config(DropoutAt::residual, 1));
  Rng init(4);  // attention far from uniform, branches that matter
  for (const Tensor& p : gpt.parameters())
    for (int64_t i = 0; i < p.numel(); ++i) p.data()[i] = 0.5f * init.normal();
  const int64_t B = 2, T = 5, C = 8;
  const std::vector<int32_t> ids{1, 3, 5, 0, 6, 2, 4, 0, 1, 3};  // (B, T)
  Rng draws = gpt.dropout_rng();
  const kernels::DropoutMask attn_mask(kP, draws.next_u64()), ffwd_mask(kP, draws.next_u64());
  NoGradGuard no_grad;
  const Tensor logits = gpt.forward(ids, B, T).logits;  // (B, T, V)

  gpt.eval();  // the pieces without dropout; the masks applied here
  const nn::Block& block = *gpt.blocks[0];
  auto dropped = [&](const Tensor& branch, const kernels::DropoutMask& mask) {  // (B, T, C)
    Tensor out = Tensor::empty(branch.shape());
    for (int64_t i = 0; i < branch.numel(); ++i)
      out.data()[i] = mask.kept(i) ? branch.data()[i] / (1.0f - kP) : 0.0f;
    return out;
  };
  const Tensor x = gpt.token_embedding->forward(ids, {B, T});  // (B, T, C)
  const Tensor h = add(x, dropped(block.attn->forward(block.ln1->forward(x)), attn_mask));
  const Tensor y = add(h, dropped(block.ffwd->forward(block.ln2->forward(h)), ffwd_mask));
  const Tensor expected = gpt.lm_head->forward(gpt.ln_f->forward(y));  // (B, T, V)
  ASSERT_EQ(y.numel(), B * T * C);
  const std::vector<float> got = logits.to_vector(), want = expected.to_vector();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5f) << "logit " << i;
}

// The option adds no parameter, draws none at initialisation, and is off outside
// training: every setting evaluates as the model without dropout, bit for bit.
TEST(DropoutAt, OutsideTrainingEverySettingIsTheModelWithoutDropout) {
  nn::GPTConfig plain = config(DropoutAt::all);
  plain.dropout = 0.0f;
  const nn::GPT without(plain);
  const std::vector<int32_t>& ids = testing::kIds2x6;  // (2, 6)
  NoGradGuard no_grad;
  const std::vector<float> expected = without.forward(ids, 2, 6).logits.to_vector();
  for (DropoutAt at : {DropoutAt::all, DropoutAt::residual, DropoutAt::attention}) {
    SCOPED_TRACE(nn::to_string(at));
    nn::GPT gpt(config(at));
    ASSERT_EQ(gpt.flat_parameters().to_vector(), without.flat_parameters().to_vector());
    EXPECT_NE(gpt.forward(ids, 2, 6).logits.to_vector(), expected);  // training: something dropped
    gpt.eval();
    EXPECT_EQ(gpt.forward(ids, 2, 6).logits.to_vector(), expected);
  }
}

}  // namespace
}  // namespace folio
