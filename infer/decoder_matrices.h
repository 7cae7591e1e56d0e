#pragma once
// A model's weight matrices as the decoder's products read them (infer/decoder.h),
// and those products: one row (a decode step), a batch's rows, a prompt's.
//
// Each is a Linear's weight (N, K), in the precision of the model's products and
// stored as --weights says (nn/weights.h): fp32 panels, bf16, or Q8_0 blocks, which
// the products read as stored. fp32 weights are copied once into panels of kPanel rows
// stored column by column, (ceil(N / kPanel), K, kPanel): a product then reads them as
// one stream, which is what a token's time goes to.
#include <cstdint>
#include <memory>
#include <vector>

#include "autograd/kernels/matmul.h"
#include "infer/kernels/quant.h"
#include "nn/transformer.h"
#include "nn/weights.h"

namespace folio::infer {

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

// What the products need besides their operands: the activations rounded to bf16
// (bf16 products), a tile of weights widened to fp32 (a prompt's products from bf16 or
// Q8_0 weights) with its part of the result, and the activations quantized for the
// integer product (--weights int8 steps).
struct ProductScratch {
  std::vector<kernels::bf16> x16;  // (M, K)
  std::vector<float> tile, ytile;  // (rows, K), (M, rows)
  std::vector<int8_t> xq;          // (M, ceil(K / 32) * 32)
  std::vector<float> xscale;       // (M, ceil(K / 32))
  int threads = 1;                 // a step's products' (Decoder::set_threads)
};

// A prompt of this many rows or more runs as the forward does: its products
// oneDNN's blocked fp32 product (bf16 and int8 on widened tiles, int8 in integers with
// VNNI) on all the calling thread's threads, its attention through matrix products
// (infer/decoder_attention.cpp). A shorter one runs through a step's kernels, which
// read the weights once for its few rows.
inline constexpr int64_t kPromptProductRows = 32;

struct StoredMatrix {
  static constexpr int64_t kPanel = 64;  // four 16-float vectors of sums
  static int64_t panel_floats(const Tensor& weight) {
    return (weight.size(0) + kPanel - 1) / kPanel * kPanel * weight.size(1);
  }
  StoredMatrix(const Tensor& weight, const Tensor& bias, Precision p, nn::Weights w, PanelStore& store);
  // Y (M, N) = X (M, K) W^T [+ bias], reading the weights once for all M rows (one for
  // a decode step): the panels four rows at a time (fp32), or one oneDNN product (bf16),
  // on step_threads(scratch) threads (1 unless Decoder::set_threads asked for more).
  // With `prompt` and at least kPromptProductRows rows (a long prefill), fp32 products
  // are oneDNN's blocked product on the Linear's own weights instead, with the threads
  // of the calling thread's setting: as fast as the model's forward, where four rows
  // per pass would read the weights T / 4 times.
  // With --weights bf16, rows are products of the stored weights widened in
  // registers, each weight row used for all M rows while in cache, a long prompt's
  // oneDNN's fp32 product on tiles of weights widened to fp32. With int8, the rows are
  // quantized to int8 blocks too and multiplied in integers (integer_rows:
  // kernels::q8x8_rows' kernel family on the blocks repacked in groups of 8 rows,
  // panels of up to 8 prompt rows per pass over a group's weights), a step's always, a
  // long prompt's where the CPU has AVX-512 VNNI (else on widened tiles, as bf16's:
  // fewer instructions than AVX2's integer products); FOLIO_INT8_KERNEL chooses
  // otherwise, to time one against the other (decoder_products.cpp).
  void apply_rows(const float* x, float* y, int64_t M, ProductScratch& scratch, bool prompt) const;
  int64_t bytes() const;  // of the weights as the products read them
  // The threads a step's product on this matrix runs on: scratch.threads when the
  // matrix has at least kSplitWeights weights (below that the fork and join, a few
  // microseconds, cost about what the product does) and rows for each, else 1.
  static constexpr int64_t kSplitWeights = int64_t(1) << 17;
  int step_threads(const ProductScratch& scratch) const;
  const float* bias;
  int64_t N, K;
  nn::Weights stored;              // f32: panels, or bf16 products with w16
  const float* weight;             // (N, K) the Linear's own, in the model
  const float* packed = nullptr;   // fp32 products: panels in the store
  std::vector<kernels::bf16> w16;  // bf16 products or --weights bf16: the weights rounded, as Linear's (N, K)
  // --weights int8: (ceil(N / 8), ceil(K / 32)) Q8_0 blocks repacked in groups of 8
  // rows (kernels::BlockQ8x8), so a step's product reads each group as one stream
  std::vector<kernels::BlockQ8x8> q8;

 private:
  void packed_rows(const float* x, float* y, int64_t M, ProductScratch& scratch) const;
  void widened_rows(const float* x, float* y, int64_t M, ProductScratch& scratch) const;
  void integer_rows(const float* x, float* y, int64_t M, ProductScratch& scratch, int threads) const;
};

// fail()s, naming the variable, its value and the values it takes, unless
// FOLIO_INT8_KERNEL is unset or names a kernel this CPU runs (decoder_products.cpp):
// for a command to refuse it as bad usage before it runs anything.
void check_int8_kernel();

// A model's matrices as a decoder's products read them, built by Decoder::store;
// every block's four (qkv, proj, fc, fc2), then the output layer.
class DecoderMatrices {
 public:
  DecoderMatrices(const nn::GPT& model, nn::Weights weights);
  nn::Weights weights;               // how they are stored: f32 panels, bf16, Q8_0 blocks
  PanelStore store;                  // the fp32 panels of all of them (empty otherwise)
  std::vector<StoredMatrix> blocks;  // (n_layer * 4): qkv (3C, C), proj (C, C), fc (H or 2H, C), fc2 (C, H) of each
  StoredMatrix lm_head;              // (V, C)
};

}  // namespace folio::infer
