#pragma once
// Causal self-attention, as in ../shared/seeds/causal-head-with-dropout.txt.
#include <memory>
#include <optional>
#include <vector>

#include "nn/layers.h"

namespace folio::nn {

// Rotary position embedding tables for one model, computed once (in double, stored
// as float): cos and sin of p * theta_i, theta_i = base^(-2i / head_size), for
// positions p < block_size and i < head_size / 2. See rope() in autograd/ops.h.
struct RotaryTables {
  RotaryTables(int64_t block_size, int64_t head_size, double base = 10000.0);
  // One row: cos and sin (head_size / 2 each) at position p, any p >= 0 (generation
  // past block_size rotates by positions the tables do not hold).
  static void row(int64_t p, int64_t head_size, float* cos, float* sin, double base = 10000.0);
  Tensor cos, sin;  // (block_size, head_size / 2)
};

// The options GPTConfig hands its blocks (it says what each is for). Only qkv_bias adds
// a parameter (MultiHead's qkv_bias); the others leave parameter_count() as it is.
// QK-norm is RMSNorm without a weight: no tensor for a checkpoint to carry, and no
// centring, which for q and k would only remove one arbitrary direction (the all-ones
// one) from the dot products. The scores keep the head_size^-0.5 scale, so they stay
// within +-sqrt(head_size).
struct BlockOptions {
  bool qk_norm = false;                                  // rms_norm() on q and k, per head, before the scores
  std::shared_ptr<const RotaryTables> rotary = nullptr;  // set: q and k are rotated by position
  bool zero_init_proj = false;                           // the output projections start at zero
  float drop_path = 0.0f;  // Block: the probability that a sequence skips a branch in training (DropPath)
  std::optional<float> weights_dropout = std::nullopt;  // the attention weights' dropout; unset: the dropout given beside
  bool rms_norm = false;  // Block: ln1 and ln2 are RMSNorms (nn::LayerNorm's rms)
  bool qkv_bias = false;  // MultiHead: key, query and value get a bias (GPT-2's c_attn has one)
  int64_t ffn_hidden = 0;  // Block: the feed-forward's hidden width; 0: feed_forward_hidden()'s default
};

// One head: scores q k^T * head_size^-0.5, the tril mask (-inf above the diagonal),
// softmax, dropout on the weights, weights @ v.   x (B, T, C) -> (B, T, head_size)
// With options.qk_norm, q and k are RMS-normalised first; with options.rotary, they
// are then rotated by position (from 0). With `weights`, also hands out the attention
// weights (B, T, T) after the softmax and before dropout: rows are queries, columns
// keys, zero above the diagonal.
class Head : public Module {
 public:
  Head(int64_t n_embd, int64_t head_size, int64_t block_size, float dropout, Arena arena,
       std::shared_ptr<Rng> dropout_rng = std::make_shared<Rng>(0), BlockOptions options = {});
  Head(int64_t n_embd, int64_t head_size, int64_t block_size, float dropout, Rng& init,
       std::shared_ptr<Rng> dropout_rng = std::make_shared<Rng>(0), BlockOptions options = {});
  static int64_t parameter_count(int64_t n_embd, int64_t head_size) {
    return 3 * Linear::parameter_count(n_embd, head_size, false);
  }
  // bias: (3 * head_size) [k; q; v] added to the three projections (MultiHead's slice
  // of its qkv_bias); undefined: none.
  Tensor forward(const Tensor& x, Tensor* weights = nullptr, const Tensor& bias = {}) const;

  std::shared_ptr<Linear> key, query, value;  // registered in this order, no bias of their own
  int64_t head_size, block_size;

 private:
  BlockOptions options_;
  std::shared_ptr<Dropout> dropout_;
};

// q or k (..., T, head_size) as the options have the scores see it: RMS-normalised
// (qk_norm), then rotated to positions 0, 1, ... (rotary).
Tensor position_query_key(const Tensor& x, const BlockOptions& options);

// The precision of MultiHead's fused attention in a model of precision `model` at
// context T: bf16 from kBf16AttentionFromT on, where the bf16 products outrun the passes
// that round and lay out their operands, fp32 below. Measured on Zen 4 with AVX512-BF16
// (docs/results/speed.md): at T 256 (config M) a bf16 step is ~2 % faster with bf16
// attention and takes 19 % less memory; at T 64 (config S) the bf16 op is ~1.25x slower.
constexpr int64_t kBf16AttentionFromT = 256;
Precision attention_precision(Precision model, int64_t T);

// n_head Heads side by side, concatenated and projected: x (B, T, C) -> (B, T, C).
// The Heads take their key/query/value weights from the arena one after another, so
// together they are one (n_head * 3 * head_size, C) matrix: forward() runs them as one
// projection and batched matmuls over B * n_head; forward_heads() runs the Head
// modules one by one: the specification it must equal.
class MultiHead : public Module {
 public:
  MultiHead(int64_t n_embd, int64_t n_head, int64_t head_size, int64_t block_size, float dropout,
            bool bias, Arena arena, std::shared_ptr<Rng> dropout_rng = std::make_shared<Rng>(0),
            BlockOptions options = {});
  MultiHead(int64_t n_embd, int64_t n_head, int64_t head_size, int64_t block_size, float dropout,
            bool bias, Rng& init, std::shared_ptr<Rng> dropout_rng = std::make_shared<Rng>(0),
            BlockOptions options = {});
  static int64_t parameter_count(int64_t n_embd, int64_t n_head, int64_t head_size, bool bias,
                                 bool qkv_bias = false) {
    return n_head * Head::parameter_count(n_embd, head_size) + (qkv_bias ? n_head * 3 * head_size : 0) +
           Linear::parameter_count(n_head * head_size, n_embd, bias);
  }
  // With `weights`, also hands out the attention weights (B, n_head, T, T) after the
  // softmax and before dropout. With `values` (B, T, n_head * head_size), each head's
  // values gain their slice of it (GPT's value embeddings).
  Tensor forward(const Tensor& x, Tensor* weights = nullptr, const Tensor& values = {}) const;
  Tensor forward_heads(const Tensor& x) const;

  // The heads' key, query and value weights as one (n_head * 3 * head_size, C) matrix,
  // per head [k; q; v]: a view of the heads' parameters.
  const Tensor& qkv_weight() const { return qkv_weight_; }
  // With options.qkv_bias, their biases (n_head * 3 * head_size) in the same order, a
  // parameter of its own (taken after the heads' weights, named "qkv_bias"), so that
  // the weights stay one matrix; undefined without.
  const Tensor& qkv_bias() const { return qkv_bias_; }
  const BlockOptions& options() const { return options_; }

  std::vector<std::shared_ptr<Head>> heads;
  std::shared_ptr<Linear> proj;
  int64_t n_head, head_size, block_size;

 private:
  BlockOptions options_;
  Tensor qkv_weight_;  // (n_head * 3 * head_size, C)
  Tensor qkv_bias_;    // (n_head * 3 * head_size) or undefined
  Tensor attend(const Tensor& qkv, int64_t B, int64_t T, Tensor* weights) const;
  // x (B, T, C) -> the packed projection (B, T, n_head * 3 * head_size), its values
  // plus `values` when given.
  Tensor project(const Tensor& x, const Tensor& values) const;
  std::shared_ptr<Dropout> attn_dropout_, resid_dropout_;
};

}  // namespace folio::nn
