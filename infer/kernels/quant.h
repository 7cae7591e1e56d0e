#pragma once
// Weights stored small for inference, and the matrix-vector products that read them
// as they are stored:
//   BlockQ8      32 int8 weights and their fp16 scale, 34 bytes: GGUF's Q8_0 block,
//                byte for byte, so an export or import maps block for block
//   quantize_q8  one row of K floats -> ceil(K / 32) blocks, symmetric, scale
//                max|w| / 127 (the last block zero-padded)
//   q8_rows      y (M, N) = x (M, K) W^T for W (N, K) as blocks: each weight widened
//                to fp32 in registers and multiplied by the fp32 activation, one sum per
//                block scaled by its scale. The activations are not quantized, so a
//                product differs from f32 by the weights' rounding alone.
//   bf16_rows    the same from W (N, K) as bf16, widened in registers (no bf16
//                instructions needed)
//   quantize_rows_q8   the activation rows of the integer product (the decoder's
//                --weights int8): quantized per block of 32 with an fp32 scale, each
//                block's dot an exact int32 sum of int8 products scaled by the two
//                blocks' scales. It costs the activations' rounding on top of the
//                weights' (docs/results/inference.md measures it).
//   BlockQ8x8, repack_q8x8, q8x8_rows   the same integer product on the decoder's
//                layout of the blocks: for each group of 8 weight rows, block b of all
//                8 rows together (8 fp16 scales, then the 8 rows' quants interleaved 4
//                by 4), so that one 32-byte vector holds 4 consecutive weights of each
//                of the 8 rows. A product then needs no sum across lanes: lane r of
//                its int32 sums is row r's. One kernel family serves a decode step (one
//                activation row) and a prompt (panels of rows reusing each weight
//                vector while it is in registers): plain, AVX2 (vpmaddubsw/vpmaddwd),
//                AVX-512 VNNI (vpdpbusd on 256-bit vectors, 512 for 16 rows and
//                more: two groups at once), chosen at run time.
// Each fast product (AVX2 + FMA + F16C where the CPU has them, chosen at run time) has
// a plain twin (the fallback elsewhere) and a reference in double that
// tests/test_quant.cpp compares them with.
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <utility>
#include <vector>

#include "autograd/kernels/cpu_features.h"
#include "autograd/kernels/fp16.h"
#include "autograd/kernels/matmul.h"

namespace folio::kernels {

inline constexpr int64_t kQ8Block = 32;

struct BlockQ8 {
  uint16_t scale;          // fp16 bits
  int8_t q[kQ8Block];      // weight = scale * q, q in [-127, 127]
};
static_assert(sizeof(BlockQ8) == 34, "a Q8_0 block is 34 bytes");

inline int64_t q8_blocks(int64_t K) { return (K + kQ8Block - 1) / kQ8Block; }

// w (K) -> out (q8_blocks(K)).
void quantize_q8(const float* w, int64_t K, BlockQ8* out);
// blocks (q8_blocks(K)) -> w (K).
void dequantize_q8(const BlockQ8* blocks, int64_t K, float* w);

// y (M, N) = x (M, K) W^T [+ bias (N)], W (N, q8_blocks(K)) blocks, row by row.
void q8_rows(const BlockQ8* W, const float* x, float* y, int64_t M, int64_t N, int64_t K, const float* bias);
// y (M, N) = x (M, K) W^T [+ bias (N)], W (N, K) bf16.
void bf16_rows(const bf16* W, const float* x, float* y, int64_t M, int64_t N, int64_t K, const float* bias);

// x (M, K) -> q (M, q8_blocks(K) * 32) int8 in [-127, 127], each row's last block
// zero-padded as the weights' are, and scale (M, q8_blocks(K)): max|x| / 127 of each
// block, x ~ scale * q, rounded to nearest even. Runs the fastest loop this CPU has
// (row_quantizers().back(), quant_rows.cpp); all write the same bytes.
void quantize_rows_q8(const float* x, int64_t M, int64_t K, int8_t* q, float* scale);
using QuantizeRowsQ8 = void(const float* x, int64_t M, int64_t K, int8_t* q, float* scale);

// One of a family of loops that compute the same thing, by name, to choose one
// (benchmarks, tests, FOLIO_INT8_KERNEL).
template <class Loop>
struct NamedLoop {
  const char* name;
  Loop* rows;
};
// The loops of `all` whose CPU test passed, in the order given (slowest first).
template <class Loop>
std::vector<NamedLoop<Loop>> runnable(std::initializer_list<std::pair<NamedLoop<Loop>, bool>> all) {
  std::vector<NamedLoop<Loop>> kept;
  for (const auto& [loop, runs] : all)
    if (runs) kept.push_back(loop);
  return kept;
}

using RowQuantizer = NamedLoop<QuantizeRowsQ8>;  // "plain", "avx2", "avx512"
// Those this CPU runs, slowest first: plain always, then avx2, avx512 where it has them.
const std::vector<RowQuantizer>& row_quantizers();

// 8 weight rows' block b: the decoder's layout of Q8_0 blocks (a GGUF file keeps
// BlockQ8's). The same bytes per weight as BlockQ8, rows past N padded with zeros.
inline constexpr int64_t kQ8Group = 8;
inline constexpr int64_t kQ8Quad = 4;  // weights of a row side by side: vpdpbusd's 4 products per lane
struct BlockQ8x8 {
  uint16_t scale[kQ8Group];                                 // fp16 bits, row r's in scale[r]
  int8_t q[kQ8Block / kQ8Quad][kQ8Group][kQ8Quad];          // q[i][r][j]: row r's weight 4i + j
  int8_t at(int64_t r, int64_t k) const { return q[k / kQ8Quad][r][k % kQ8Quad]; }  // row r's weight k
};
static_assert(sizeof(BlockQ8x8) == 272, "8 Q8_0 blocks, their scales first");

inline int64_t q8x8_groups(int64_t N) { return (N + kQ8Group - 1) / kQ8Group; }

// W (N, q8_blocks(K)) blocks -> out (q8x8_groups(N), q8_blocks(K)): group g's block b
// holds rows 8g..8g+7's block b (zeros past N).
void repack_q8x8(const BlockQ8* W, int64_t N, int64_t K, BlockQ8x8* out);
// Row n of P (q8x8_groups(N), q8_blocks(K)) -> w (K), as dequantize_q8 of its blocks.
void dequantize_q8x8_row(const BlockQ8x8* P, int64_t n, int64_t K, float* w);
// The rows of groups [first_group, last_group) that are below N -> w (rows, K), each
// as dequantize_q8x8_row writes it: a prompt's product widens its weights a tile of
// groups at a time (infer/decoder_products.cpp).
void dequantize_q8x8_groups(const BlockQ8x8* P, int64_t first_group, int64_t last_group, int64_t N, int64_t K,
                            float* w);
// y (M, N) = xq (M, K) W^T [+ bias (N)] for the output columns of groups
// [first_group, last_group) only (their rows n < N): W as repack_q8x8 wrote it, xq as
// quantize_rows_q8 wrote it. Disjoint group ranges write disjoint columns of y, so
// threads may each take a range.
// Runs the fastest kernel this CPU has (integer_kernels().back()).
void q8x8_rows(const BlockQ8x8* P, const int8_t* xq, const float* xscale, float* y, int64_t M, int64_t N, int64_t K,
               const float* bias, int64_t first_group, int64_t last_group);

// The kernels of q8x8_rows, to choose one by name (benchmarks, tests, FOLIO_INT8_KERNEL).
using Q8x8Rows = void(const BlockQ8x8* P, const int8_t* xq, const float* xscale, float* y, int64_t M, int64_t N,
                      int64_t K, const float* bias, int64_t first_group, int64_t last_group);
using IntegerKernel = NamedLoop<Q8x8Rows>;  // "plain", "avx2", "vnni"
// Those this CPU runs, slowest first: plain always, then avx2, vnni where it has them.
const std::vector<IntegerKernel>& integer_kernels();
// The one of that name, or nullptr if this CPU does not run it (or none has the name).
const IntegerKernel* find_integer_kernel(std::string_view name);

namespace detail {
// The plain loops (the fallback without AVX2), and the references: each weight
// dequantized, sums in double.
void q8_rows_plain(const BlockQ8* W, const float* x, float* y, int64_t M, int64_t N, int64_t K, const float* bias);
void bf16_rows_plain(const bf16* W, const float* x, float* y, int64_t M, int64_t N, int64_t K, const float* bias);
void q8_rows_reference(const BlockQ8* W, const float* x, float* y, int64_t M, int64_t N, int64_t K,
                       const float* bias);
void bf16_rows_reference(const bf16* W, const float* x, float* y, int64_t M, int64_t N, int64_t K,
                         const float* bias);
void q8q8_rows_reference(const BlockQ8* W, const int8_t* xq, const float* xscale, float* y, int64_t M, int64_t N,
                         int64_t K, const float* bias);
Q8x8Rows q8x8_rows_plain;
void dequantize_q8x8_groups_plain(const BlockQ8x8* P, int64_t first_group, int64_t last_group, int64_t N, int64_t K,
                                  float* w);
// The AVX2 products; callable only where avx2_fma_f16c() says so.
bool avx2_fma_f16c();
void q8_rows_avx2(const BlockQ8* W, const float* x, float* y, int64_t M, int64_t N, int64_t K, const float* bias);
void bf16_rows_avx2(const bf16* W, const float* x, float* y, int64_t M, int64_t N, int64_t K, const float* bias);
Q8x8Rows q8x8_rows_avx2;
void dequantize_q8x8_groups_avx2(const BlockQ8x8* P, int64_t first_group, int64_t last_group, int64_t N, int64_t K,
                                 float* w);
// AVX-512 F, BW and VL (and the OS saving their registers), with VNNI for
// avx512_vnni(); the AVX-512 loops are callable only where they say so.
bool avx512_bw_vl();
bool avx512_vnni();
QuantizeRowsQ8 quantize_rows_q8_plain, quantize_rows_q8_avx2, quantize_rows_q8_avx512;
Q8x8Rows q8x8_rows_vnni;
}  // namespace detail

}  // namespace folio::kernels
