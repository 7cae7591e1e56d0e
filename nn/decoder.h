#pragma once
// The generation hot loop: one token at a time through a GPT, with keys and values
// cached in buffers sized for the whole context. No Tensors, no graph, no allocation
// per token: at config S a token costs about as much as reading the weights once.
// It computes what GPT::forward computes, up to the order of float sums in the
// products; tests/test_decoder.cpp holds it to forward's logits.
#include <cstdint>
#include <span>
#include <vector>

#include "autograd/kernels/matmul.h"
#include "nn/transformer.h"

namespace folio::nn {

class Decoder {
 public:
  // Reads the model's weights in place (fp32 products) or converts them once (bf16
  // products, as the model's precision says): the model must outlive the decoder and
  // not change while it decodes.
  explicit Decoder(const GPT& model);

  // Forgets the cache and runs ids (1 <= size <= block_size) at positions 0.. as one
  // batched forward, whose keys and values fill the cache. Returns the last
  // position's logits (V), valid until the next call.
  std::span<const float> restart(std::span<const int32_t> ids);
  // Runs one token at position length() and caches it. Returns its logits (V), valid
  // until the next call. With learned positions, length() < block_size. With rotary
  // positions the cache rolls: the token attends to the last block_size positions
  // (itself included), each key rotated by its own position, so every score sees the
  // true distance between query and key, however long the text.
  std::span<const float> step(int32_t id);
  int64_t length() const { return length_; }  // positions run so far (since restart)
  bool rolls() const { return config_.pos == Positions::rope; }

 private:
  // y (N) = W (N, K) x (K) [+ bias], W stored as PyTorch's Linear stores it, in the
  // precision of the model's products.
  struct Matrix {
    Matrix(const Tensor& weight, const Tensor& bias, Precision p);
    void apply(const float* x, float* y, std::vector<kernels::bf16>& scratch) const;
    const float *w, *bias;
    int64_t N, K;
    std::vector<kernels::bf16> w16;  // the weights rounded to bf16, for bf16 products
  };
  struct Layer {
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    Matrix qkv, proj, fc, fc2;
    std::vector<float> k, v;  // (n_head, block_size, head_size); position p in slot p % block_size
  };
  void attend(Layer& L, int64_t pos);  // qkv_ -> y_, caching this position's key and value
  const GPT& model_;
  const GPTConfig& config_;
  std::vector<Layer> layers_;
  Matrix lm_head_;
  int64_t length_ = 0;
  std::vector<float> x_, h_, qkv_, att_, y_, ff_, logits_, cos_, sin_;  // scratch for one token
  std::vector<kernels::bf16> x16_;
};

}  // namespace folio::nn
