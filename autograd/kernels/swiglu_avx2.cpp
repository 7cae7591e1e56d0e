// SwiGLU's AVX2 + FMA path (swiglu.h): 8 lanes, the row's tail by masked loads and
// stores, so every element takes the same arithmetic whatever its place in the row.
// Compiled for AVX2 + FMA whatever the build's -march; swiglu.cpp calls it only on a
// CPU that has those.
#include <immintrin.h>

#include "autograd/kernels/swiglu.h"

#define FOLIO_AVX2 __attribute__((target("avx2,fma")))

namespace folio::kernels::detail {
namespace {

// exp_plain's steps (swiglu.cpp) on 8 lanes, with fused multiply-adds.
FOLIO_AVX2 inline __m256 exp8(__m256 x) {
  // max/min give their second operand for a NaN lane: clamped here, put back at the end.
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  // 2^n as 2^(n/2) 2^(n - n/2): both factors normal for n in [-150, 128].
  const __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// sigmoid(g) = 1 / (1 + e^-g)
FOLIO_AVX2 inline __m256 sigmoid8(__m256 g) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
}

// Lanes [0, k) of a tail of k < 8 elements.
FOLIO_AVX2 inline __m256i tail_mask(int64_t k) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(k)), lane);
}

// 8 lanes, or the first lanes under m when !kFull (the row's tail).
template <bool kFull>
FOLIO_AVX2 inline __m256 load(const float* p, __m256i m) {
  if constexpr (kFull) return _mm256_loadu_ps(p);
  else return _mm256_maskload_ps(p, m);
}
template <bool kFull>
FOLIO_AVX2 inline void store(float* p, __m256i m, __m256 v) {
  if constexpr (kFull) _mm256_storeu_ps(p, v);
  else _mm256_maskstore_ps(p, m, v);
}

template <bool kFull>
FOLIO_AVX2 inline void forward_block(const float* gate, const float* up, float* o, __m256i m) {
  const __m256 g = load<kFull>(gate, m), u = load<kFull>(up, m);
  store<kFull>(o, m, _mm256_mul_ps(_mm256_mul_ps(g, sigmoid8(g)), u));
}

template <bool kFull>
FOLIO_AVX2 inline void backward_block(const float* gate, const float* up, const float* gr, float* dgate, float* dup,
                                      bool add, __m256i m) {
  const __m256 a = load<kFull>(gate, m), u = load<kFull>(up, m), d = load<kFull>(gr, m);
  const __m256 s = sigmoid8(a), one = _mm256_set1_ps(1.0f);
  const __m256 ds = _mm256_mul_ps(s, _mm256_fmadd_ps(a, _mm256_sub_ps(one, s), one));  // d silu / d a
  __m256 dg = _mm256_mul_ps(_mm256_mul_ps(d, u), ds), du = _mm256_mul_ps(d, _mm256_mul_ps(a, s));
  if (add) {
    dg = _mm256_add_ps(load<kFull>(dgate, m), dg);
    du = _mm256_add_ps(load<kFull>(dup, m), du);
  }
  store<kFull>(dgate, m, dg);
  store<kFull>(dup, m, du);
}

}  // namespace

FOLIO_AVX2 void exp_n_avx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, exp8(_mm256_maskload_ps(x + i, m)));
  }
}

FOLIO_AVX2 void swiglu_rows_avx2(const float* x, float* out, int64_t rows, int64_t H) {
  const __m256i m = tail_mask(H % 8);
  for (int64_t r = 0; r < rows; ++r) {
    const float *gate = x + r * 2 * H, *up = gate + H;
    float* o = out + r * H;
    int64_t i = 0;
    for (; i + 8 <= H; i += 8) forward_block<true>(gate + i, up + i, o + i, m);
    if (i < H) forward_block<false>(gate + i, up + i, o + i, m);
  }
}

FOLIO_AVX2 void swiglu_backward_avx2(const float* x, const float* g, float* gx, bool store, int64_t rows,
                                     int64_t H) {
  const __m256i m = tail_mask(H % 8);
  for (int64_t r = 0; r < rows; ++r) {
    const float *gate = x + r * 2 * H, *up = gate + H, *gr = g + r * H;
    float *dgate = gx + r * 2 * H, *dup = dgate + H;
    int64_t i = 0;
    for (; i + 8 <= H; i += 8) backward_block<true>(gate + i, up + i, gr + i, dgate + i, dup + i, !store, m);
    if (i < H) backward_block<false>(gate + i, up + i, gr + i, dgate + i, dup + i, !store, m);
  }
}

}  // namespace folio::kernels::detail
