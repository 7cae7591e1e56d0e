// Multi-token prediction (--mtp): cross_entropy's rows without a target, the training
// loss against a hand computation in double, and the loss outside training, which is
// the next-token loss of the model without the option. The gradient check and the
// parameter count run with every option in test_model_options.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "nn/transformer.h"
#include "train/data_parallel.h"
#include "tests/support.h"

namespace folio {
namespace {

// -log softmax(row)[target], in double.
double nll(const float* row, int64_t V, int32_t target) {
  double top = row[0], sum = 0.0;
  for (int64_t v = 1; v < V; ++v) top = std::max(top, double(row[v]));
  for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - top);
  return -(double(row[target]) - top - std::log(sum));
}

// Rows of kNoTarget neither count in the mean nor get a gradient: the loss and the
// other rows' gradients are those of the rows with a target alone.
TEST(CrossEntropy, RowsWithoutATargetAreLeftOut) {
  Rng r(3);
  const Tensor all = Tensor::randn({6, 5}, r).set_requires_grad();  // (6, 5)
  const std::vector<int32_t> targets{0, kNoTarget, 2, kNoTarget, 4, 3};
  cross_entropy(all, targets).backward();
  const float* a = all.data();
  std::vector<float> kept_rows;
  for (int64_t row : {0, 2, 4, 5}) kept_rows.insert(kept_rows.end(), a + row * 5, a + row * 5 + 5);
  const Tensor kept = Tensor::from({4, 5}, kept_rows).set_requires_grad();  // (4, 5)
  const Tensor want = cross_entropy(kept, std::vector<int32_t>{0, 2, 4, 3});
  want.backward();
  EXPECT_FLOAT_EQ(cross_entropy(all, targets).item(), want.item());
  const std::vector<float> got = all.grad().to_vector(), expected = kept.grad().to_vector();
  int64_t k = 0;
  for (int64_t row = 0; row < 6; ++row)
    for (int64_t v = 0; v < 5; ++v) {
      if (targets[size_t(row)] == kNoTarget) EXPECT_EQ(got[size_t(row * 5 + v)], 0.0f) << row;
      else EXPECT_FLOAT_EQ(got[size_t(row * 5 + v)], expected[size_t(k++)]) << row;
    }

  const Tensor none = Tensor::randn({2, 5}, r).set_requires_grad();  // (2, 5)
  const Tensor zero = cross_entropy(none, std::vector<int32_t>{kNoTarget, kNoTarget});
  EXPECT_EQ(zero.item(), 0.0f);
  zero.backward();
  EXPECT_EQ(none.grad().to_vector(), std::vector<float>(10, 0.0f));
  testing::expect_error([&] { cross_entropy(none, std::vector<int32_t>{1, -2}); }, {"target -2", "row 1"});
}

nn::GPTConfig small(float mtp) {  // rope: the embedding is the token table alone
  nn::GPTConfig c;
  c.vocab_size = 7, c.block_size = 6, c.n_layer = 2, c.n_head = 2, c.n_embd = 8, c.pos = nn::Positions::rope;
  c.mtp = mtp;
  return c;
}

// In training, the loss is the next-token cross-entropy plus mtp times the second
// head's cross-entropy against the token two ahead, over the positions that have one.
TEST(MultiToken, TrainingLossAddsTheTokenTwoAhead) {
  nn::GPTConfig c = small(0.5f);
  const float cap = 1.5f;  // small enough to bend the logits of these weights
  c.logit_softcap = cap;
  const nn::GPT gpt(c);
  Rng r(5);
  for (const Tensor& p : gpt.parameters())
    for (int64_t i = 0; i < p.numel(); ++i) p.data()[i] = 0.4f * r.normal();
  const int64_t B = 2, T = 5, V = 7;
  const std::vector<int32_t> ids{1, 3, 5, 0, 6, 2, 2, 4, 0, 1}, targets{3, 5, 0, 6, 2, 2, 4, 1, 1, 5};
  const float loss = gpt.forward(ids, B, T, targets).loss.item();

  NoGradGuard no_grad;
  Tensor x = gpt.token_embedding->forward(ids, {B, T});  // (B, T, C)
  for (const auto& block : gpt.blocks) x = block->forward(x);
  const Tensor h = gpt.ln_f->forward(x);  // (B, T, C)
  auto capped = [&](const Tensor& logits) {  // (B, T, V), under the soft cap both heads share
    std::vector<float> v = logits.to_vector();
    for (float& z : v) z = cap * std::tanh(z / cap);
    return v;
  };
  const std::vector<float> next = capped(gpt.lm_head->forward(h)), two = capped(gpt.mtp_head->forward(h));
  double next_sum = 0.0, two_sum = 0.0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t row = b * T + t;
      next_sum += nll(next.data() + row * V, V, targets[size_t(row)]);
      if (t + 1 < T) two_sum += nll(two.data() + row * V, V, targets[size_t(row + 1)]);  // the token at t + 2
    }
  EXPECT_NEAR(loss, next_sum / double(B * T) + 0.5 * two_sum / double(B * (T - 1)), 1e-5);
}

// Outside training the loss is the next-token loss: the model without the option's,
// whose parameters are the same ones (the head comes after them all).
TEST(MultiToken, EvaluationIsTheNextTokenLossAlone) {
  nn::GPT with(small(2.0f)), without(small(0.0f));
  const auto a = without.named_parameters(), b = with.named_parameters();
  ASSERT_EQ(b.size(), a.size() + 2);  // mtp_head.weight and .bias
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(b[i].second.to_vector(), a[i].second.to_vector()) << a[i].first;
  EXPECT_EQ(b[a.size()].first, "mtp_head.weight");
  with.eval(), without.eval();
  const std::vector<int32_t> ids{1, 3, 5, 0, 6, 2}, targets{3, 5, 0, 6, 2, 2};
  EXPECT_EQ(with.forward(ids, 1, 6, targets).loss.item(), without.forward(ids, 1, 6, targets).loss.item());
  with.train();
  EXPECT_GT(with.forward(ids, 1, 6, targets).loss.item(), without.forward(ids, 1, 6, targets).loss.item());
  nn::GPTConfig bad = small(-1.0f);
  testing::expect_error([&] { bad.validate(); }, {"mtp", "-1"});
}

// A training step reports its next-token loss beside the loss it trains on: the
// figure an evaluation of the same batch measures (dropout off), on one model and
// summed over the shards of data parallelism, while the loss trained on is larger.
TEST(MultiToken, TrainingReportsTheNextTokenLossAlone) {
  nn::GPTConfig c = small(0.5f);
  c.dropout = 0.0f;
  nn::GPT gpt(c);
  const std::vector<int32_t> ids{1, 3, 5, 0, 6, 2, 2, 4, 0, 1, 3, 5}, targets{3, 5, 0, 6, 2, 2, 4, 1, 1, 5, 4, 2};
  gpt.eval();
  const float evaluated = gpt.forward(ids, 2, 6, targets).loss.item();
  gpt.train();
  const nn::GPT::Output out = gpt.forward(ids, 2, 6, targets);
  EXPECT_FLOAT_EQ(out.next_token_loss.item(), evaluated);
  EXPECT_GT(out.loss.item(), evaluated + 0.5f);  // about 1.5 times: the term of the token two ahead
  DataParallel dp(gpt, 2);
  const float trained = dp.forward_backward(ids, targets, 2, 6);
  EXPECT_NEAR(dp.next_token_loss(), evaluated, 1e-5f);
  EXPECT_GT(trained, evaluated + 0.5f);
  gpt.zero_grad();

  const nn::GPT plain(small(0.0f));
  const nn::GPT::Output without = plain.forward(ids, 2, 6, targets);
  EXPECT_EQ(without.next_token_loss.item(), without.loss.item());
}

}  // namespace
}  // namespace folio
