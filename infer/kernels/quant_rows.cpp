// quantize_rows_q8 (quant.h): the activation rows of the integer product, quantized per
// block of 32. The plain loop, an AVX2 one and an AVX-512 one, chosen at run time; the
// vector ones write the same bytes and scales as the plain one, whatever the input
// (NaN, infinities, subnormal blocks included), since each value takes the same steps
// in the same order:
//   amax   the max of |x| over the block, NaNs skipped: std::max(amax, |x|) keeps amax
//          when |x| is NaN, and so does (v)maxps(|x|, amax), which returns its second
//          operand when either is NaN; a max is exact, so the order of the lanes is not
//   d, inv amax / 127 and 1 / d in scalar, as the plain loop
//   q      x * inv (one rounding, no FMA), clamped to [-127, 127], then converted in
//          the current rounding mode (nearest even, as nearbyint): clamping to an
//          integer before rounding or after gives the same integer; NaN -> 0.
// At one thread the plain loop took about 9 % of an AVX2 integer prompt's instructions.
// The vector loops are compiled for their instruction sets whatever the build's
// -march, and called only where the CPU has them.
// GCC 12 warns that its own 512-bit intrinsics (_mm512_max_ps, ...) use an
// uninitialized operand, the pass-through of their unmasked form; the pragma precedes
// the header, where the warnings point.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "infer/kernels/quant.h"

#define FOLIO_AVX2 __attribute__((target("avx2,fma,f16c")))
#define FOLIO_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw")))

namespace folio::kernels {
namespace detail {

void quantize_rows_q8_plain(const float* x, int64_t M, int64_t K, int8_t* q, float* scale) {
  const int64_t nb = q8_blocks(K);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x + m * K + b * kQ8Block;
      const int64_t n = std::min(kQ8Block, K - b * kQ8Block);
      float amax = 0.0f;
      for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const float d = amax / 127.0f, inv = d > 0.0f ? 1.0f / d : 0.0f;
      scale[m * nb + b] = d;
      int8_t* qb = q + (m * nb + b) * kQ8Block;
      for (int64_t i = 0; i < kQ8Block; ++i) {
        const float r = i < n ? std::nearbyint(xb[i] * inv) : 0.0f;  // padding: zeros
        qb[i] = std::isnan(r) ? 0 : int8_t(std::clamp(r, -127.0f, 127.0f));
      }
    }
}

namespace {

// Row m's blocks one by one: a whole block straight from x, the last (K % 32 values)
// from a copy padded with zeros, which quantize to zeros whatever the scale.
// Inlined into each instruction set's loop (and its block function with it).
template <float (*block)(const float* xb, int8_t* qb)>
__attribute__((always_inline)) inline void blocks_of_rows(const float* x, int64_t M, int64_t K, int8_t* q,
                                                           float* scale) {
  const int64_t nb = q8_blocks(K), whole = K / kQ8Block;
  for (int64_t m = 0; m < M; ++m) {
    const float* xm = x + m * K;
    for (int64_t b = 0; b < whole; ++b) scale[m * nb + b] = block(xm + b * kQ8Block, q + (m * nb + b) * kQ8Block);
    if (whole < nb) {
      alignas(64) float padded[kQ8Block] = {};
      std::memcpy(padded, xm + whole * kQ8Block, sizeof(float) * size_t(K - whole * kQ8Block));
      scale[m * nb + whole] = block(padded, q + (m * nb + whole) * kQ8Block);
    }
  }
}

inline float inverse(float d) { return d > 0.0f ? 1.0f / d : 0.0f; }

// 32 floats at xb -> 32 quants at qb; returns the block's scale.
FOLIO_AVX2 inline float block_avx2(const float* xb, int8_t* qb) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();  // (8) never NaN: |x| first, amax second
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(xb + 8 * i);
    amax = _mm256_max_ps(_mm256_and_ps(v[i], abs_mask), amax);
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float d = _mm_cvtss_f32(m4) / 127.0f;
  const __m256 inv = _mm256_set1_ps(inverse(d));
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  __m256i i32[4];
  for (int i = 0; i < 4; ++i) {
    __m256 r = _mm256_mul_ps(v[i], inv);
    r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q));  // NaN -> 0
    i32[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
  }
  // packs interleave the two 128-bit halves: bytes come out as 4-quant runs of
  // vectors 0, 1, 2, 3, 0, 1, 2, 3; the permutation puts each vector's runs together.
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(i32[0], i32[1]), _mm256_packs_epi32(i32[2], i32[3]));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb), _mm256_permutevar8x32_epi32(packed, order));
  return d;
}

FOLIO_AVX512 inline float block_avx512(const float* xb, int8_t* qb) {
  const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
  __m512 amax = _mm512_max_ps(_mm512_abs_ps(v0), _mm512_setzero_ps());  // (16) never NaN
  amax = _mm512_max_ps(_mm512_abs_ps(v1), amax);
  const float d = _mm512_reduce_max_ps(amax) / 127.0f;
  const __m512 inv = _mm512_set1_ps(inverse(d));
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  for (int i = 0; i < 2; ++i) {
    const __m512 r = _mm512_mul_ps(i ? v1 : v0, inv);
    const __mmask16 number = _mm512_cmp_ps_mask(r, r, _CMP_ORD_Q);  // NaN lanes -> 0
    const __m512i i32 = _mm512_maskz_mov_epi32(number, _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(r, lo), hi)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16 * i), _mm512_cvtsepi32_epi8(i32));
  }
  return d;
}

}  // namespace

FOLIO_AVX2 void quantize_rows_q8_avx2(const float* x, int64_t M, int64_t K, int8_t* q, float* scale) {
  blocks_of_rows<block_avx2>(x, M, K, q, scale);
}

FOLIO_AVX512 void quantize_rows_q8_avx512(const float* x, int64_t M, int64_t K, int8_t* q, float* scale) {
  blocks_of_rows<block_avx512>(x, M, K, q, scale);
}

}  // namespace detail

const std::vector<RowQuantizer>& row_quantizers() {
  static const std::vector<RowQuantizer> quantizers =
      runnable<QuantizeRowsQ8>({{{"plain", detail::quantize_rows_q8_plain}, true},
                                {{"avx2", detail::quantize_rows_q8_avx2}, detail::avx2_fma_f16c()},
                                {{"avx512", detail::quantize_rows_q8_avx512}, detail::avx512_bw_vl()}});
  return quantizers;
}

void quantize_rows_q8(const float* x, int64_t M, int64_t K, int8_t* q, float* scale) {
  static QuantizeRowsQ8* const fastest = row_quantizers().back().rows;
  fastest(x, M, K, q, scale);
}

}  // namespace folio::kernels
