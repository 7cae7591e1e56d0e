// Q8_0 blocks and bf16 rows: quantizing, the plain products and their references, and
// the choice of the AVX2 products (quant_avx2.cpp) where the CPU has them.
#include "infer/kernels/quant.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace folio::kernels {

void quantize_q8(const float* w, int64_t K, BlockQ8* out) {
  for (int64_t b = 0; b < q8_blocks(K); ++b) {
    const int64_t first = b * kQ8Block, n = std::min(kQ8Block, K - first);
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(w[first + i]));
    const float d = amax / 127.0f, inv = d > 0.0f ? 1.0f / d : 0.0f;
    BlockQ8& blk = out[b];
    blk.scale = fp16_from_float(d);
    for (int64_t i = 0; i < kQ8Block; ++i) {
      const float q = i < n ? std::nearbyint(w[first + i] * inv) : 0.0f;  // padding: zeros
      blk.q[i] = std::isnan(q) ? 0 : int8_t(std::clamp(q, -127.0f, 127.0f));  // a NaN to int8 is undefined
    }
  }
}

void dequantize_q8(const BlockQ8* blocks, int64_t K, float* w) {
  for (int64_t k = 0; k < K; ++k) {
    const BlockQ8& blk = blocks[k / kQ8Block];
    w[k] = fp16_to_float(blk.scale) * float(blk.q[k % kQ8Block]);
  }
}

namespace detail {

// Weight row by weight row, each used for all M activation rows while it is in cache:
// the weights are read from memory once per call.
void q8_rows_plain(const BlockQ8* W, const float* x, float* y, int64_t M, int64_t N, int64_t K, const float* bias) {
  const int64_t nb = q8_blocks(K);
  for (int64_t n = 0; n < N; ++n) {
    const BlockQ8* row = W + n * nb;
    for (int64_t m = 0; m < M; ++m) {
      const float* xm = x + m * K;
      float sum = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t first = b * kQ8Block, len = std::min(kQ8Block, K - first);
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < len; ++i) s += float(row[b].q[i]) * xm[first + i];
        sum += fp16_to_float(row[b].scale) * s;
      }
      y[m * N + n] = sum + (bias ? bias[n] : 0.0f);
    }
  }
}

void bf16_rows_plain(const bf16* W, const float* x, float* y, int64_t M, int64_t N, int64_t K, const float* bias) {
  for (int64_t n = 0; n < N; ++n) {
    const bf16* row = W + n * K;
    for (int64_t m = 0; m < M; ++m) {
      const float* xm = x + m * K;
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int64_t k = 0; k < K; ++k) s += to_float(row[k]) * xm[k];
      y[m * N + n] = s + (bias ? bias[n] : 0.0f);
    }
  }
}

// Both operands dequantized, sums in double.
void q8q8_rows_reference(const BlockQ8* W, const int8_t* xq, const float* xscale, float* y, int64_t M, int64_t N,
                         int64_t K, const float* bias) {
  const int64_t nb = q8_blocks(K);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      double s = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const BlockQ8& blk = W[n * nb + k / kQ8Block];
        const double w = double(fp16_to_float(blk.scale)) * blk.q[k % kQ8Block];
        s += w * (double(xscale[m * nb + k / kQ8Block]) * xq[m * nb * kQ8Block + k]);
      }
      y[m * N + n] = float(s);
    }
}

void q8_rows_reference(const BlockQ8* W, const float* x, float* y, int64_t M, int64_t N, int64_t K,
                       const float* bias) {
  std::vector<float> w(static_cast<size_t>(K));  // (K) one row dequantized
  for (int64_t n = 0; n < N; ++n) {
    dequantize_q8(W + n * q8_blocks(K), K, w.data());
    for (int64_t m = 0; m < M; ++m) {
      double s = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) s += double(w[size_t(k)]) * double(x[m * K + k]);
      y[m * N + n] = float(s);
    }
  }
}

void bf16_rows_reference(const bf16* W, const float* x, float* y, int64_t M, int64_t N, int64_t K,
                         const float* bias) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      double s = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) s += double(to_float(W[n * K + k])) * double(x[m * K + k]);
      y[m * N + n] = float(s);
    }
}

bool avx2_fma_f16c() {
  static const bool has = avx2_fma() && has_f16c();
  return has;
}

}  // namespace detail

void q8_rows(const BlockQ8* W, const float* x, float* y, int64_t M, int64_t N, int64_t K, const float* bias) {
  detail::avx2_fma_f16c() ? detail::q8_rows_avx2(W, x, y, M, N, K, bias) : detail::q8_rows_plain(W, x, y, M, N, K, bias);
}

void bf16_rows(const bf16* W, const float* x, float* y, int64_t M, int64_t N, int64_t K, const float* bias) {
  detail::avx2_fma_f16c() ? detail::bf16_rows_avx2(W, x, y, M, N, K, bias)
                          : detail::bf16_rows_plain(W, x, y, M, N, K, bias);
}

}  // namespace folio::kernels
