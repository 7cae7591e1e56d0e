// The AVX2 products of quant.h with fp32 activations: weights widened to fp32 in
// registers (int8 by vpmovsxbd, bf16 by vpmovzxwd and a shift), then FMA with the
// activations; and the decoder's int8 blocks widened to fp32 rows.
// Compiled for AVX2 + FMA + F16C whatever the build's -march; quant.cpp calls them only
// on a CPU that has those.
#include <immintrin.h>

#include <algorithm>

#include "infer/kernels/quant.h"

#define FOLIO_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace folio::kernels::detail {
namespace {


FOLIO_AVX2 inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 8 int8 at p -> 8 floats
FOLIO_AVX2 inline __m256 widen8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// R weight rows (nb blocks each, `stride` blocks apart) against one activation row x
// (K): y[r] for r < R. Each x vector is loaded once for the R rows; a block's sum is
// scaled once, so its 32 products need no scale each.
template <int R>
FOLIO_AVX2 void q8_dot(const BlockQ8* W, int64_t stride, const float* x, int64_t K, float* y) {
  const int64_t full = K / kQ8Block;
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < full; ++b) {
    const float* xb = x + b * kQ8Block;
    const __m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8), x2 = _mm256_loadu_ps(xb + 16),
                 x3 = _mm256_loadu_ps(xb + 24);
    for (int r = 0; r < R; ++r) {
      const BlockQ8& blk = W[r * stride + b];
      __m256 s = _mm256_mul_ps(widen8(blk.q), x0);
      s = _mm256_fmadd_ps(widen8(blk.q + 8), x1, s);
      s = _mm256_fmadd_ps(widen8(blk.q + 16), x2, s);
      s = _mm256_fmadd_ps(widen8(blk.q + 24), x3, s);
      acc[r] = _mm256_fmadd_ps(s, _mm256_set1_ps(_cvtsh_ss(blk.scale)), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float tail = 0.0f;  // the last block, when K is not a multiple of 32
    if (full * kQ8Block < K) {
      const BlockQ8& blk = W[r * stride + full];
      for (int64_t k = full * kQ8Block; k < K; ++k) tail += float(blk.q[k - full * kQ8Block]) * x[k];
      tail *= _cvtsh_ss(blk.scale);
    }
    y[r] = sum8(acc[r]) + tail;
  }
}

template <int R>
FOLIO_AVX2 void bf16_dot(const bf16* W, int64_t K, const float* x, float* y) {
  const auto* w = reinterpret_cast<const uint16_t*>(W);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    const __m256 xv = _mm256_loadu_ps(x + k);
    for (int r = 0; r < R; ++r) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + r * K + k));
      const __m256 wv = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
      acc[r] = _mm256_fmadd_ps(wv, xv, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float tail = 0.0f;
    for (int64_t t = k; t < K; ++t) tail += to_float(W[r * K + t]) * x[t];
    y[r] = sum8(acc[r]) + tail;
  }
}

}  // namespace

// Four weight rows at a time, for every activation row while they are in cache.
FOLIO_AVX2 void q8_rows_avx2(const BlockQ8* W, const float* x, float* y, int64_t M, int64_t N, int64_t K,
                             const float* bias) {
  const int64_t nb = q8_blocks(K);
  float out[4];
  for (int64_t n = 0; n < N; n += 4) {
    const int64_t R = std::min<int64_t>(4, N - n);
    for (int64_t m = 0; m < M; ++m) {
      switch (R) {
        case 4: q8_dot<4>(W + n * nb, nb, x + m * K, K, out); break;
        case 3: q8_dot<3>(W + n * nb, nb, x + m * K, K, out); break;
        case 2: q8_dot<2>(W + n * nb, nb, x + m * K, K, out); break;
        default: q8_dot<1>(W + n * nb, nb, x + m * K, K, out); break;
      }
      for (int64_t r = 0; r < R; ++r) y[m * N + n + r] = out[r] + (bias ? bias[n + r] : 0.0f);
    }
  }
}

// Block by block, each of the group's rows: its fp16 scale broadcast once, its 32
// quants gathered from the interleaved block (8 of 4 bytes, 32 apart) and widened 8
// at a time and scaled (the same product, float(q) * scale, as the plain loop's, so the
// same floats).
FOLIO_AVX2 void dequantize_q8x8_groups_avx2(const BlockQ8x8* P, int64_t first_group, int64_t last_group, int64_t N,
                                            int64_t K, float* w) {
  const int64_t nb = q8_blocks(K), full = K / kQ8Block;
  const __m256i quads = _mm256_setr_epi32(0, 32, 64, 96, 128, 160, 192, 224);  // bytes from q[0][r] to q[i][r]
  static_assert(sizeof(BlockQ8x8::q[0]) == 32, "a quad of each of the 8 rows: 32 bytes");
  for (int64_t g = first_group; g < last_group; ++g) {
    const int64_t R = std::min(kQ8Group, N - g * kQ8Group);
    const BlockQ8x8* group = P + g * nb;
    float* out = w + (g - first_group) * kQ8Group * K;  // (R, K)
    for (int64_t b = 0; b < full; ++b) {
      const __m256 scales = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group[b].scale)));
      alignas(32) float s[kQ8Group];
      _mm256_store_ps(s, scales);
      for (int64_t r = 0; r < R; ++r) {
        const __m256 scale = _mm256_set1_ps(s[r]);
        alignas(32) int8_t row[kQ8Block];  // row r's 32 quants in order
        _mm256_store_si256(reinterpret_cast<__m256i*>(row),
                           _mm256_i32gather_epi32(reinterpret_cast<const int*>(group[b].q[0][r]), quads, 1));
        float* o = out + r * K + b * kQ8Block;
        for (int i = 0; i < kQ8Block; i += 8) _mm256_storeu_ps(o + i, _mm256_mul_ps(widen8(row + i), scale));
      }
    }
    for (int64_t r = 0; r < R && full < nb; ++r)  // the last, partial block
      for (int64_t k = full * kQ8Block; k < K; ++k)
        out[r * K + k] = _cvtsh_ss(group[full].scale[r]) * float(group[full].at(r, k - full * kQ8Block));
  }
}

FOLIO_AVX2 void bf16_rows_avx2(const bf16* W, const float* x, float* y, int64_t M, int64_t N, int64_t K,
                               const float* bias) {
  float out[4];
  for (int64_t n = 0; n < N; n += 4) {
    const int64_t R = std::min<int64_t>(4, N - n);
    for (int64_t m = 0; m < M; ++m) {
      switch (R) {
        case 4: bf16_dot<4>(W + n * K, K, x + m * K, out); break;
        case 3: bf16_dot<3>(W + n * K, K, x + m * K, out); break;
        case 2: bf16_dot<2>(W + n * K, K, x + m * K, out); break;
        default: bf16_dot<1>(W + n * K, K, x + m * K, out); break;
      }
      for (int64_t r = 0; r < R; ++r) y[m * N + n + r] = out[r] + (bias ? bias[n + r] : 0.0f);
    }
  }
}

}  // namespace folio::kernels::detail
