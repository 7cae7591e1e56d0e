#pragma once
// Causal self-attention, as in ../shared/seeds/causal-head-with-dropout.txt.
#include <memory>
#include <vector>

#include "nn/layers.h"

namespace folio::nn {

// One head: scores q k^T * head_size^-0.5, the tril mask (-inf above the diagonal),
// softmax, dropout on the weights, weights @ v.   x (B, T, C) -> (B, T, head_size)
// With `weights`, also hands out the attention weights (B, T, T) after the softmax and
// before dropout: rows are queries, columns keys, zero above the diagonal.
class Head : public Module {
 public:
  Head(int64_t n_embd, int64_t head_size, int64_t block_size, float dropout, Arena arena,
       std::shared_ptr<Rng> dropout_rng = std::make_shared<Rng>(0));
  Head(int64_t n_embd, int64_t head_size, int64_t block_size, float dropout, Rng& init,
       std::shared_ptr<Rng> dropout_rng = std::make_shared<Rng>(0));
  static int64_t parameter_count(int64_t n_embd, int64_t head_size) {
    return 3 * Linear::parameter_count(n_embd, head_size, false);
  }
  Tensor forward(const Tensor& x, Tensor* weights = nullptr) const;

  std::shared_ptr<Linear> key, query, value;  // registered in this order, no bias
  int64_t head_size, block_size;

 private:
  std::shared_ptr<Dropout> dropout_;
};

// Keys and values of the positions seen so far, for generation: (B, n_head, L, head_size).
struct KVCache {
  Tensor k, v;
  int64_t length() const { return k.defined() ? k.size(2) : 0; }
};

// n_head Heads side by side, concatenated and projected: x (B, T, C) -> (B, T, C).
// The Heads take their key/query/value weights from the arena one after another, so
// together they are one (n_head * 3 * head_size, C) matrix: forward() runs them as one
// projection and batched matmuls over B * n_head; forward_heads() runs the Head
// modules one by one: the specification it must equal.
class MultiHead : public Module {
 public:
  MultiHead(int64_t n_embd, int64_t n_head, int64_t head_size, int64_t block_size, float dropout,
            bool bias, Arena arena, std::shared_ptr<Rng> dropout_rng = std::make_shared<Rng>(0));
  MultiHead(int64_t n_embd, int64_t n_head, int64_t head_size, int64_t block_size, float dropout,
            bool bias, Rng& init, std::shared_ptr<Rng> dropout_rng = std::make_shared<Rng>(0));
  static int64_t parameter_count(int64_t n_embd, int64_t n_head, int64_t head_size, bool bias) {
    return n_head * Head::parameter_count(n_embd, head_size) + Linear::parameter_count(n_head * head_size, n_embd, bias);
  }
  // With `weights`, also hands out the attention weights (B, n_head, T, T) after the
  // softmax and before dropout.
  Tensor forward(const Tensor& x, Tensor* weights = nullptr) const;
  Tensor forward_heads(const Tensor& x) const;
  // Inference only: attends the new positions x (B, Tn, C) to the cache and to each
  // other, and appends their keys and values to the cache.
  Tensor forward_cached(const Tensor& x, KVCache& cache) const;

  // The heads' key, query and value weights as one (n_head * 3 * head_size, C) matrix,
  // per head [k; q; v]: a view of the heads' parameters.
  const Tensor& qkv_weight() const { return qkv_weight_; }

  std::vector<std::shared_ptr<Head>> heads;
  std::shared_ptr<Linear> proj;
  int64_t n_head, head_size, block_size;

 private:
  Tensor qkv_weight_;
  Tensor attend(const Tensor& qkv, int64_t B, int64_t T, KVCache* cache, Tensor* weights = nullptr) const;
  std::shared_ptr<Dropout> attn_dropout_, resid_dropout_;
};

}  // namespace folio::nn
