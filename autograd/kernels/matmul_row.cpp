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
      // Four rows at a time: four independent sums keep the FMA units busy (one sum
      // alone waits on its own latency), and each a[k] is loaded once for four rows.
      int64_t n = 0;
      for (; n + 4 <= N; n += 4) {
        const float *w0 = w + n * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
        for (int64_t k = 0; k < K; ++k) {
          s0 += a[k] * w0[k];
          s1 += a[k] * w1[k];
          s2 += a[k] * w2[k];
          s3 += a[k] * w3[k];
        }
        const float sums[4] = {s0, s1, s2, s3};
        for (int i = 0; i < 4; ++i)
          c[n + i] = (g.accumulate ? c[n + i] : 0.0f) + sums[i] + (bias ? bias[n + i] : 0.0f);
      }
      for (; n < N; ++n) {
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
    if (g.relu) relu_in_place(c, N);
  }
}

}  // namespace folio::kernels
