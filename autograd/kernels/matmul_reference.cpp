#include "autograd/kernels/matmul.h"

namespace folio::kernels {

void matmul_reference(const Gemm& g, const float* A, const float* B, float* C, const float* bias) {
  const int64_t M = g.M, N = g.N, K = g.K;
  for (int64_t b = 0; b < g.batch; ++b) {
    const float* a = A + (g.broadcast_a ? 0 : b * M * K);
    const float* w = B + (g.broadcast_b ? 0 : b * K * N);
    float* c = C + b * M * N;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = bias ? bias[j] : 0.0;
        for (int64_t k = 0; k < K; ++k) {
          const float aik = g.trans_a ? a[k * M + i] : a[i * K + k];
          const float bkj = g.trans_b ? w[j * K + k] : w[k * N + j];
          acc += double(aik) * double(bkj);
        }
        if (g.accumulate) acc += c[i * N + j];
        c[i * N + j] = float(!g.relu || acc > 0.0 ? acc : 0.0);  // NaN to 0, as the kernels
      }
  }
}

}  // namespace folio::kernels
