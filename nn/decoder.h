#pragma once
// The generation hot loop: one token at a time through a GPT, with keys and values
// cached in buffers sized for the whole context. No Tensors, no graph, no allocation
// per token: at config S a token costs about as much as reading the weights once.
// It computes what GPT::forward computes, up to the order of float sums in the
// products; tests/test_decoder.cpp holds it to forward's logits.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "autograd/kernels/matmul.h"
#include "nn/transformer.h"

namespace folio::nn {

class Decoder {
 public:
  // Copies the model's weights once, in the layout its products read (and as bf16 if
  // the model's precision says so); reads the embeddings and norms in place. The model
  // must outlive the decoder and not change while it decodes.
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
  // y (N) = W (N, K) x (K) [+ bias], from a Linear's weight (N, K), in the precision of
  // the model's products. fp32 weights are copied once into panels of kPanel rows
  // stored column by column, (ceil(N / kPanel), K, kPanel): a product then reads them as
  // one stream, which is what a token's time goes to.
  // Where the fp32 panels live: one allocation for them all (about 4 bytes per
  // parameter), in 2 MiB pages where the kernel offers them, since a generate call
  // faulting it in 4 KiB pages cost more than the packing itself.
  class PanelStore {
   public:
    explicit PanelStore(int64_t floats);
    float* take(int64_t floats);  // the next `floats` of the store
   private:
    struct Free {
      void operator()(float* p) const;
    };
    std::unique_ptr<float[], Free> data_;
    int64_t size_ = 0, used_ = 0;
  };
  struct Matrix {
    static constexpr int64_t kPanel = 64;  // four 16-float vectors of sums
    static int64_t panel_floats(const Tensor& weight) {
      return (weight.size(0) + kPanel - 1) / kPanel * kPanel * weight.size(1);
    }
    Matrix(const Tensor& weight, const Tensor& bias, Precision p, PanelStore& store);
    void apply(const float* x, float* y, std::vector<kernels::bf16>& scratch) const;
    const float* bias;
    int64_t N, K;
    const float* packed = nullptr;   // fp32 products: panels in the store
    std::vector<kernels::bf16> w16;  // bf16 products: the weights rounded, as Linear's (N, K)
  };
  struct Layer {
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    Matrix qkv, proj, fc, fc2;
    // Keys (n_head, head_size, block_size), transposed for the scores' loop, and values
    // (n_head, block_size, head_size); position p in slot p % block_size.
    std::vector<float> k, v;
  };
  static int64_t panel_floats(const GPT& model);  // of all its products (0 for bf16 ones)
  void attend(Layer& L, int64_t pos);  // qkv_ -> y_, caching this position's key and value
  const GPT& model_;
  const GPTConfig& config_;
  PanelStore store_;
  std::vector<Layer> layers_;
  Matrix lm_head_;
  int64_t length_ = 0;
  std::vector<float> x_, h_, qkv_, att_, y_, ff_, logits_, cos_, sin_;  // scratch for one token
  std::vector<kernels::bf16> x16_;
};

}  // namespace folio::nn
