#include "nn/attention.h"

#include <cmath>
#include <cstring>

#include "base/error.h"

namespace folio::nn {

RotaryTables::RotaryTables(int64_t block_size, int64_t head_size, double base) {
  if (block_size < 1 || head_size < 2 || head_size % 2)
    fail("rope", "needs block_size >= 1 and an even head_size, got ", block_size, " and ", head_size);
  const int64_t h = head_size / 2;
  cos = Tensor::empty({block_size, h});
  sin = Tensor::empty({block_size, h});
  for (int64_t p = 0; p < block_size; ++p) row(p, head_size, cos.data() + p * h, sin.data() + p * h, base);
}

void RotaryTables::row(int64_t p, int64_t head_size, float* cos, float* sin, double base) {
  for (int64_t i = 0; i < head_size / 2; ++i) {  // in double: p * theta_i stays exact enough for any p
    const double angle = double(p) * std::pow(base, -2.0 * double(i) / double(head_size));
    cos[i] = float(std::cos(angle));
    sin[i] = float(std::sin(angle));
  }
}

Tensor position_query_key(const Tensor& x, const BlockOptions& options) {
  Tensor y = options.qk_norm ? rms_norm(x) : x;
  if (options.rotary) y = rope(y, options.rotary->cos, options.rotary->sin, 0);
  return y;
}

Head::Head(int64_t n_embd, int64_t head_size, int64_t block_size, float dropout, Arena arena,
           std::shared_ptr<Rng> dropout_rng, BlockOptions options)
    : head_size(head_size), block_size(block_size), options_(std::move(options)) {
  key = register_module("key", std::make_shared<Linear>(n_embd, head_size, false, arena));
  query = register_module("query", std::make_shared<Linear>(n_embd, head_size, false, arena));
  value = register_module("value", std::make_shared<Linear>(n_embd, head_size, false, arena));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(options_.weights_dropout.value_or(dropout),
                                                                 std::move(dropout_rng)));
}
Head::Head(int64_t n_embd, int64_t head_size, int64_t block_size, float dropout, Rng& init,
           std::shared_ptr<Rng> dropout_rng, BlockOptions options)
    : Head(n_embd, head_size, block_size, dropout, Arena(parameter_count(n_embd, head_size), init),
           std::move(dropout_rng), std::move(options)) {}

Tensor Head::forward(const Tensor& x, Tensor* weights, const Tensor& bias) const {
  if (x.ndim() != 3 || x.size(1) > block_size)
    fail("head", "input ", x.shape(), " must be (B, T, C) with T <= block_size ", block_size);
  if (bias.defined() && (bias.ndim() != 1 || bias.size(0) != 3 * head_size))
    fail("head", "bias ", bias.shape(), " must be (3 * head_size) = (", 3 * head_size, ")");
  std::vector<Tensor> b(3);  // k, q, v biases (hs) each, or undefined
  if (bias.defined()) b = split(bias, {head_size, head_size, head_size});
  const Tensor k = position_query_key(linear(x, key->weight, b[0], precision()), options_);  // (B, T, hs)
  const Tensor q = position_query_key(linear(x, query->weight, b[1], precision()), options_);
  const Tensor v = linear(x, value->weight, b[2], precision());
  Tensor wei = matmul(q, k, false, true, precision());  // (B, T, T)
  wei = causal_softmax(wei, 1.0f / std::sqrt(float(head_size)));
  if (weights) *weights = wei;
  wei = dropout_->forward(wei);
  return matmul(wei, v, false, false, precision());  // (B, T, hs)
}

MultiHead::MultiHead(int64_t n_embd, int64_t n_head, int64_t head_size, int64_t block_size, float dropout,
                     bool bias, Arena arena, std::shared_ptr<Rng> dropout_rng, BlockOptions options)
    : n_head(n_head), head_size(head_size), block_size(block_size), options_(std::move(options)) {
  if (n_head < 1 || head_size < 1) fail("multihead", "n_head ", n_head, " and head_size ", head_size, " must be positive");
  if (options_.rotary && (options_.rotary->cos.size(0) < block_size || options_.rotary->cos.size(1) * 2 != head_size))
    fail("multihead", "rotary tables ", options_.rotary->cos.shape(), " for block_size ", block_size, " and head_size ",
         head_size);
  const int64_t qkv_begin = arena.taken();
  for (int64_t h = 0; h < n_head; ++h) {
    auto head = std::make_shared<Head>(n_embd, head_size, block_size, dropout, arena, dropout_rng, options_);
    heads.push_back(register_module("heads." + std::to_string(h), head));
  }
  // The heads took their key, query and value weights one after another: one matrix.
  qkv_weight_ = arena.since(qkv_begin, {n_head * 3 * head_size, n_embd});
  if (options_.qkv_bias) qkv_bias_ = register_parameter("qkv_bias", arena.full({n_head * 3 * head_size}, 0.0f));
  proj = register_module("proj", std::make_shared<Linear>(n_head * head_size, n_embd, bias, arena,
                                                          options_.zero_init_proj ? 0.0f : kInitStd));
  attn_dropout_ = register_module("attn_dropout",
                                  std::make_shared<Dropout>(options_.weights_dropout.value_or(dropout), dropout_rng));
  resid_dropout_ = register_module("dropout", std::make_shared<Dropout>(dropout, dropout_rng));
}
MultiHead::MultiHead(int64_t n_embd, int64_t n_head, int64_t head_size, int64_t block_size, float dropout,
                     bool bias, Rng& init, std::shared_ptr<Rng> dropout_rng, BlockOptions options)
    : MultiHead(n_embd, n_head, head_size, block_size, dropout, bias,
                Arena(parameter_count(n_embd, n_head, head_size, bias, options.qkv_bias), init), std::move(dropout_rng),
                std::move(options)) {}

Precision attention_precision(Precision model, int64_t T) {
  return model == Precision::bf16 && T >= kBf16AttentionFromT ? Precision::bf16 : Precision::fp32;
}

Tensor MultiHead::attend(const Tensor& qkv, int64_t B, int64_t T, Tensor* weights) const {
  const int64_t hs = head_size;
  const float scale = 1.0f / std::sqrt(float(hs));
  // q, k and v read in place, after one pass that applies the options.
  const Tensor packed = !options_.qk_norm && !options_.rotary
                            ? qkv
                            : position_qk_packed(qkv, n_head, options_.qk_norm,
                                                 options_.rotary ? options_.rotary->cos : Tensor{},
                                                 options_.rotary ? options_.rotary->sin : Tensor{});
  if (weights) {  // what the scores make of the same q and k, for those who look: (B, nh, T, T)
    const Tensor k = select_heads(packed, n_head, hs, 0, 3 * hs), q = select_heads(packed, n_head, hs, hs, 3 * hs);
    *weights = causal_softmax(matmul(q, k, false, true, precision()), scale);
  }
  // Attention in one op: no masked half computed, the weights' dropout inside.
  const Tensor y = causal_attention_packed(packed, n_head, scale, attn_dropout_->fused(),
                                           attention_precision(precision(), T));  // (B, T, nh * hs)
  return resid_dropout_->forward(proj->forward(y));
}

Tensor MultiHead::project(const Tensor& x, const Tensor& values) const {
  const Tensor qkv = linear(x, qkv_weight_, qkv_bias_, precision());  // (B, T, nh * 3 * hs)
  return values.defined() ? add_into_heads(qkv, values, n_head, head_size, 2 * head_size, 3 * head_size) : qkv;
}

Tensor MultiHead::forward(const Tensor& x, Tensor* weights, const Tensor& values) const {
  if (x.ndim() != 3 || x.size(1) > block_size)
    fail("multihead", "input ", x.shape(), " must be (B, T, C) with T <= block_size ", block_size);
  return attend(project(x, values), x.size(0), x.size(1), weights);
}

Tensor MultiHead::forward_heads(const Tensor& x) const {
  std::vector<Tensor> outs, biases(heads.size());  // biases: (3 * hs) a head, or undefined
  if (qkv_bias_.defined()) biases = split(qkv_bias_, std::vector<int64_t>(size_t(n_head), 3 * head_size));
  for (size_t h = 0; h < heads.size(); ++h) outs.push_back(heads[h]->forward(x, nullptr, biases[h]));
  return resid_dropout_->forward(proj->forward(concat(outs)));
}

}  // namespace folio::nn
