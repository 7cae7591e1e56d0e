#pragma once
// C[b] (M, N) = [relu](op(A[b]) (M, K) @ op(B[b]) (K, N) [+ bias (N)] [+ C[b]]), for b < batch.
// op(X) is X or, with trans_x, X stored transposed: A as (K, M), B as (N, K).
// A broadcast operand has no batch dimension: the same matrix serves every b.
#include <cstdint>

namespace folio::kernels {

struct Gemm {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  bool broadcast_a = false, broadcast_b = false;
  bool accumulate = false;  // C += ... instead of C = ...
  bool relu = false;        // max(0, .) of the result, the last step (a fused activation)
};

// bfloat16: the top 16 bits of a float (8-bit exponent, 7-bit mantissa). A distinct
// type, so that a float buffer cannot be handed over as bf16 by mistake.
enum class bf16 : uint16_t {};

// oneDNN's matmul primitive; primitives are cached by shape and layout.
void matmul(const Gemm& g, const float* A, const float* B, float* C, const float* bias = nullptr);
// The same product from bf16 operands, accumulated and written in fp32 (bias fp32).
void matmul(const Gemm& g, const bf16* A, const bf16* B, float* C, const float* bias = nullptr);
// Gemm::relu on a plain loop's result: max(0, c), NaN to 0 as oneDNN's eltwise_relu.
inline void relu_in_place(float* c, int64_t n) {
  for (int64_t i = 0; i < n; ++i) c[i] = c[i] > 0.0f ? c[i] : 0.0f;
}
// M = 1 (one token at a time, in generation): vectorised loops, no oneDNN call.
// matmul() takes this path by itself.
void matmul_row(const Gemm& g, const float* A, const float* B, float* C, const float* bias = nullptr);
// Plain loops with double accumulation: the test oracle.
void matmul_reference(const Gemm& g, const float* A, const float* B, float* C,
                      const float* bias = nullptr);

// How many oneDNN primitives have been created (a steady state creates none).
int64_t matmul_primitives_created();
// How many products have run, by operand type, on all threads (shows which ran).
struct MatmulCalls {
  int64_t fp32 = 0, bf16 = 0;
};
MatmulCalls matmul_calls();

// fp32 -> bf16 as AVX512-BF16's vcvtneps2bf16 does it (and with it, when the CPU has
// it): round to nearest even, NaN stays NaN (quiet), subnormals flush to zero.
// Threaded when large.
void to_bf16(const float* x, bf16* y, int64_t n);
// The output gradient g (rows, N) of a Linear, as its bf16 backward reads it, in one
// pass: d = g, or with relu_out (the forward's output after a fused ReLU) g where
// relu_out > 0 and 0 elsewhere; d rounded into d16 as to_bf16 rounds; and with
// bias_grad, d's column sums added to it, row after row (a plain loop's order). The
// same values as the three passes (mask, round, sum) it replaces, bit for bit.
void to_bf16_gradient(const float* g, const float* relu_out, int64_t rows, int64_t N, bf16* d16, float* bias_grad);
// How many elements to_bf16 has rounded, on all threads (what a step's conversions cost).
int64_t bf16_rounded();
namespace detail {
void to_bf16_plain(const float* x, bf16* y, int64_t n);  // the loop for CPUs without the instruction
}
// One element, rounded as to_bf16 rounds it.
inline bf16 round_to_bf16(float x) {
  uint32_t u;
  __builtin_memcpy(&u, &x, sizeof u);
  // Round to nearest even on the bits (adding 0x7fff plus the lowest kept bit carries
  // into the kept half exactly when the dropped half is above one half, or is one half
  // and the kept half is odd); NaN made quiet (rounding could carry it into infinity);
  // subnormals flushed to a signed zero.
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u, subnormal = (u & 0x7f800000u) == 0;
  return bf16(nan ? (u >> 16) | 0x40u : subnormal ? (u >> 16) & 0x8000u : rounded);
}
// A row of n elements on this thread, uncounted by bf16_rounded: for kernels that round
// their operands inside their own loops (the bf16 causal attention's slices).
void to_bf16_row(const float* x, bf16* y, int64_t n);
inline float to_float(bf16 x) {
  const uint32_t bits = uint32_t(x) << 16;
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

// Whether oneDNN runs bf16 products with the CPU's own bf16 instructions
// (AVX512-BF16, or AMX): without them it emulates them, far slower than fp32.
bool bf16_native();
// Whether oneDNN runs bf16 products at all: it emulates them on AVX-512 without
// AVX512-BF16, and has none below AVX-512 (an AVX2 CPU), where creating one fails.
bool bf16_runs();

}  // namespace folio::kernels
