#pragma once
// C[b] (M, N) = op(A[b]) (M, K) @ op(B[b]) (K, N) [+ bias (N)] [+ C[b]], for b < batch.
// op(X) is X or, with trans_x, X stored transposed: A as (K, M), B as (N, K).
// A broadcast operand has no batch dimension: the same matrix serves every b.
#include <cstdint>

namespace folio::kernels {

struct Gemm {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  bool broadcast_a = false, broadcast_b = false;
  bool accumulate = false;  // C += ... instead of C = ...
};

// oneDNN's matmul primitive; primitives are cached by shape and layout.
void matmul(const Gemm& g, const float* A, const float* B, float* C, const float* bias = nullptr);
// M = 1 (one token at a time, in generation): vectorised loops, no oneDNN call.
// matmul() takes this path by itself.
void matmul_row(const Gemm& g, const float* A, const float* B, float* C, const float* bias = nullptr);
// Plain loops with double accumulation: the test oracle.
void matmul_reference(const Gemm& g, const float* A, const float* B, float* C,
                      const float* bias = nullptr);

// How many oneDNN primitives have been created (a steady state creates none).
int64_t matmul_primitives_created();

}  // namespace folio::kernels
