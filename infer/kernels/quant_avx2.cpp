// The AVX2 products of quant.h: weights widened to fp32 in registers (int8 by
// vpmovsxbd, bf16 by vpmovzxwd and a shift), then FMA with the fp32 activations; and
// the integer product of int8 weights with int8 activations.
// Compiled for AVX2 + FMA + F16C whatever the build's -march; quant.cpp calls them only
// on a CPU that has those.
#include <immintrin.h>

#include <algorithm>

#include "infer/kernels/quant.h"

#define FOLIO_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace folio::kernels::detail {
namespace {

constexpr int64_t kPrefetchBlocks = 8;  // 272 bytes ahead: about four cache lines
constexpr int64_t kGroupPrefetchBlocks = 4;  // BlockQ8x8s: 1088 bytes ahead

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

// R weight rows (nb blocks each, `stride` blocks apart) against one quantized
// activation row xq (nb * 32) with its scales xs (nb): y[r] for r < R. Per block,
// vpmaddubsw needs one unsigned operand, so x's signs move onto w (vpsignb) and x
// becomes |x|: 32 products summed in pairs to int16 (at most 2 * 127 * 127, no
// saturation), then vpmaddwd with ones sums pairs to eight int32: 32 weights in about
// 10 instructions (6 on the data, 3 for the two scales, a prefetch) against the
// widening product's 16. The activation block is loaded
// and made unsigned once for the R rows; the sum converts to fp32 and is scaled by
// the two blocks' scales in one FMA.
template <int R>
FOLIO_AVX2 void q8q8_dot(const BlockQ8* W, int64_t stride, const int8_t* xq, const float* xs, int64_t nb, float* y) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * kQ8Block));
    const __m256i ax = _mm256_sign_epi8(xv, xv);
    const float dx = xs[b];
    for (int r = 0; r < R; ++r) {
      const BlockQ8& blk = W[r * stride + b];
      // The next lines of this row, a few blocks ahead: R rows are R streams, more
      // than the hardware prefetcher follows well on some cores.
      _mm_prefetch(reinterpret_cast<const char*>(&blk + kPrefetchBlocks), _MM_HINT_T0);
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.q));
      const __m256i p16 = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv, xv));
      const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
      acc[r] = _mm256_fmadd_ps(p, _mm256_set1_ps(_cvtsh_ss(blk.scale) * dx), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = sum8(acc[r]);
}

// One group of 8 weight rows (BlockQ8x8, nb blocks) against one quantized activation
// row xq (nb * 32) with its scales xs (nb): y[r] for r < 8. Per block, each row's 32
// products go to eight int32 as in q8q8_dot; then three rounds of vphaddd and a swap of
// halves reduce the 8 rows' vectors to one vector of the 8 rows' block sums, which is
// converted, scaled by the group's 8 scales (one load, one conversion) times x's, and
// added in one FMA: about 6 instructions per row and block against q8q8_dot's 10. The
// group's blocks are one sequential stream, prefetched a few blocks ahead.
FOLIO_AVX2 void q8x8_dot(const BlockQ8x8* G, const int8_t* xq, const float* xs, int64_t nb, float* y) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8x8& blk = G[b];
    // The lines of the block 4 ahead (272 bytes: 5 lines at most, a line asked twice
    // costs nothing): the stream is sequential, but a block's work is short enough
    // that the hardware prefetcher alone falls behind (bench_quant from memory).
    const char* ahead = reinterpret_cast<const char*>(&blk) + kGroupPrefetchBlocks * sizeof(BlockQ8x8);
    for (size_t line = 0; line < sizeof(BlockQ8x8); line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * kQ8Block));
    const __m256i ax = _mm256_sign_epi8(xv, xv);
    __m256i s[kQ8Group];  // row r's eight int32 partial sums
    for (int r = 0; r < kQ8Group; ++r) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.q[r]));
      s[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv, xv)), ones);
    }
    // [r0 r0 r1 r1 | r0 r0 r1 r1] ... then [r0 r1 r2 r3 | r0 r1 r2 r3], [r4..r7 | r4..r7]
    const __m256i lo = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    const __m256i hi = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
    const __m256i sum = _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20),
                                         _mm256_permute2x128_si256(lo, hi, 0x31));  // [r0 .. r7]
    const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scale))),
                                   _mm256_set1_ps(xs[b]));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), d, acc);
  }
  _mm256_storeu_ps(y, acc);
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

// Four weight rows per pass over each quantized activation row (nb * 36 bytes, in L1);
// the four rows' blocks, read once from memory, stay in L1 for the M activation rows.
FOLIO_AVX2 void q8q8_rows_avx2(const BlockQ8* W, const int8_t* xq, const float* xscale, float* y, int64_t M, int64_t N,
                               int64_t K, const float* bias) {
  const int64_t nb = q8_blocks(K);
  float out[4];
  for (int64_t n = 0; n < N; n += 4) {
    const int64_t R = std::min<int64_t>(4, N - n);
    for (int64_t m = 0; m < M; ++m) {
      const int8_t* xm = xq + m * nb * kQ8Block;
      const float* sm = xscale + m * nb;
      switch (R) {
        case 4: q8q8_dot<4>(W + n * nb, nb, xm, sm, nb, out); break;
        case 3: q8q8_dot<3>(W + n * nb, nb, xm, sm, nb, out); break;
        case 2: q8q8_dot<2>(W + n * nb, nb, xm, sm, nb, out); break;
        default: q8q8_dot<1>(W + n * nb, nb, xm, sm, nb, out); break;
      }
      for (int64_t r = 0; r < R; ++r) y[m * N + n + r] = out[r] + (bias ? bias[n + r] : 0.0f);
    }
  }
}

// Group by group; a group's blocks (nb * 272 bytes), read once from memory, stay in
// cache for the M activation rows.
FOLIO_AVX2 void q8x8_rows_avx2(const BlockQ8x8* P, const int8_t* xq, const float* xscale, float* y, int64_t M,
                               int64_t N, int64_t K, const float* bias, int64_t first_group, int64_t last_group) {
  const int64_t nb = q8_blocks(K);
  alignas(32) float out[kQ8Group];
  for (int64_t g = first_group; g < last_group; ++g) {
    const int64_t n = g * kQ8Group, R = std::min(kQ8Group, N - n);
    for (int64_t m = 0; m < M; ++m) {
      q8x8_dot(P + g * nb, xq + m * nb * kQ8Block, xscale + m * nb, nb, out);
      for (int64_t r = 0; r < R; ++r) y[m * N + n + r] = out[r] + (bias ? bias[n + r] : 0.0f);
    }
  }
}

// Block by block, each of the group's rows: its fp16 scale broadcast once, its 32
// quants widened 8 at a time and scaled (the same product, float(q) * scale, as the
// plain loop's, so the same floats).
FOLIO_AVX2 void dequantize_q8x8_groups_avx2(const BlockQ8x8* P, int64_t first_group, int64_t last_group, int64_t N,
                                            int64_t K, float* w) {
  const int64_t nb = q8_blocks(K), full = K / kQ8Block;
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
        float* o = out + r * K + b * kQ8Block;
        for (int i = 0; i < kQ8Block; i += 8) _mm256_storeu_ps(o + i, _mm256_mul_ps(widen8(group[b].q[r] + i), scale));
      }
    }
    for (int64_t r = 0; r < R && full < nb; ++r)  // the last, partial block
      for (int64_t k = full * kQ8Block; k < K; ++k)
        out[r * K + k] = _cvtsh_ss(group[full].scale[r]) * float(group[full].q[r][k - full * kQ8Block]);
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
