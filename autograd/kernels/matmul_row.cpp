// Products with one row (M = 1): one token, or one query, at a time, as generation
// with a KV cache runs them. oneDNN's kernels are built for blocks of rows, and its
// per-call cost outweighs a (1, 128) x (128, 384) product; these loops vectorise
// over the contiguous dimension instead.
#include "autograd/kernels/matmul.h"

namespace folio::kernels {

void matmul_row(const Gemm& g, const float* A, const float* B, float* C, const float* bias) {
  const int64_t N = g.N, K = g.K;
  for (int64_t b = 0; b < g.batch; ++b) {
    // With M = 1, A is (1, K) stored either way.
    const float* a = A + (g.broadcast_a ? 0 : b * K);
    const float* w = B + (g.broadcast_b ? 0 : b * K * N);
    float* c = C + b * N;
    if (g.trans_b) {  // w (N, K): N dot products of contiguous rows
      for (int64_t n = 0; n < N; ++n) {
        const float* wn = w + n * K;
        float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
        for (int64_t k = 0; k < K; ++k) acc += a[k] * wn[k];
        c[n] = (g.accumulate ? c[n] : 0.0f) + acc + (bias ? bias[n] : 0.0f);
      }
    } else {  // w (K, N): K scaled rows added into c
      for (int64_t n = 0; n < N; ++n) c[n] = (g.accumulate ? c[n] : 0.0f) + (bias ? bias[n] : 0.0f);
      for (int64_t k = 0; k < K; ++k) {
        const float ak = a[k];
        const float* wk = w + k * N;
#pragma omp simd
        for (int64_t n = 0; n < N; ++n) c[n] += ak * wk[n];
      }
    }
  }
}

}  // namespace folio::kernels
