// bf16 tiles of the causal attention: vdpbf16ps where the CPU has it, plain loops
// elsewhere. The build's -march may lack AVX512-BF16 (an AVX2 machine builds this file
// too), so the instructions are asked for per function and chosen at run time.
#include "autograd/kernels/attention_tiles_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "autograd/kernels/attention_tiles.h"

namespace folio::kernels::attention_tiles_bf16 {
namespace {

using attention_tiles::R;
constexpr int64_t kLanes = 16;  // fp32 lanes of a zmm: the columns one vector of b feeds

// R rows by NW vectors of columns: 8 x 2 accumulators, two vectors of b and a broadcast
// take 19 of AVX-512's 32 registers, as the fp32 tile does, and each step of k is a pair.
template <int NW>
__attribute__((target("avx512f,avx512bf16"))) void tile_native(const bf16* a, int64_t ars, const bf16* b,
                                                              int64_t ldb, int64_t m0, int64_t m1, float* c,
                                                              int64_t ldc, bool add) {
  __m512 acc[R][NW];
  for (int64_t r = 0; r < R; ++r)
    for (int w = 0; w < NW; ++w) acc[r][w] = _mm512_setzero_ps();
  for (int64_t m = m0; m < m1; ++m) {
    __m512bh bm[NW];
    for (int w = 0; w < NW; ++w) bm[w] = __m512bh(_mm512_loadu_si512(b + 2 * (m * ldb + w * kLanes)));
#pragma GCC unroll 8
    for (int64_t r = 0; r < R; ++r) {
      int32_t pair;  // a's two elements (r, 2m) and (r, 2m + 1), as one 32-bit lane
      std::memcpy(&pair, a + 2 * (r * ars + m), sizeof pair);
      const __m512bh ar = __m512bh(_mm512_set1_epi32(pair));
      for (int w = 0; w < NW; ++w) acc[r][w] = _mm512_dpbf16_ps(acc[r][w], ar, bm[w]);
    }
  }
#pragma GCC unroll 8
  for (int64_t r = 0; r < R; ++r)
    for (int w = 0; w < NW; ++w) {
      float* cr = c + r * ldc + w * kLanes;
      _mm512_storeu_ps(cr, add ? _mm512_add_ps(acc[r][w], _mm512_loadu_ps(cr)) : acc[r][w]);
    }
}

__attribute__((target("avx512f,avx512bf16"))) void tiles_native(const bf16* a, int64_t ars, const bf16* b,
                                                               int64_t ldb, int64_t m0, int64_t m1, float* c,
                                                               int64_t ldc, int64_t n, bool add) {
  int64_t j0 = 0;
  for (; j0 + 2 * kLanes <= n; j0 += 2 * kLanes) tile_native<2>(a, ars, b + 2 * j0, ldb, m0, m1, c + j0, ldc, add);
  for (; j0 < n; j0 += kLanes) tile_native<1>(a, ars, b + 2 * j0, ldb, m0, m1, c + j0, ldc, add);
}

// Two rows rounded with vcvtne2ps2bf16 (x0's 16 lanes low, x1's high), then interleaved
// with one vpermw.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void round_pair_rows_native(const float* x0, const float* x1,
                                                                                 int64_t n, bf16* out) {
  alignas(64) int16_t order[32];
  for (int j = 0; j < 16; ++j) order[2 * j] = int16_t(j), order[2 * j + 1] = int16_t(16 + j);
  const __m512i interleave = _mm512_load_si512(order);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    const __m512 hi = x1 ? _mm512_loadu_ps(x1 + j) : _mm512_setzero_ps();
    const __m512i both = __m512i(_mm512_cvtne2ps_pbh(hi, _mm512_loadu_ps(x0 + j)));
    _mm512_storeu_si512(out + 2 * j, _mm512_permutexvar_epi16(interleave, both));
  }
  detail::round_pair_rows_plain(x0 + j, x1 ? x1 + j : nullptr, n - j, out + 2 * j);
}

}  // namespace

bool native() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}

void tiles(const bf16* a, int64_t ars, const bf16* b, int64_t ldb, int64_t m0, int64_t m1, float* c, int64_t ldc,
           int64_t n, bool add) {
  native() ? tiles_native(a, ars, b, ldb, m0, m1, c, ldc, n, add)
           : detail::tiles_plain(a, ars, b, ldb, m0, m1, c, ldc, n, add);
}

void round_pair_rows(const float* x0, const float* x1, int64_t n, bf16* out) {
  native() ? round_pair_rows_native(x0, x1, n, out) : detail::round_pair_rows_plain(x0, x1, n, out);
}

// vdpbf16ps's arithmetic, in its order: the pair's odd product added first, then the
// even one, each product exact in fp32 (two 8-bit significands) and each sum rounded.
// The loop over pairs is outside the loop over columns: written as an inner reduction
// over pairs, two sums a step, GCC 12 at -O3 vectorizes it into wrong sums.
void detail::tiles_plain(const bf16* a, int64_t ars, const bf16* b, int64_t ldb, int64_t m0, int64_t m1, float* c,
                         int64_t ldc, int64_t n, bool add) {
  std::vector<float> acc(static_cast<size_t>(n));  // (n) one row's sums
  for (int64_t r = 0; r < R; ++r) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t m = m0; m < m1; ++m) {
      const float a0 = to_float(a[2 * (r * ars + m)]), a1 = to_float(a[2 * (r * ars + m) + 1]);
      const bf16* bm = b + 2 * m * ldb;
      for (int64_t j = 0; j < n; ++j) {
        acc[size_t(j)] += a1 * to_float(bm[2 * j + 1]);
        acc[size_t(j)] += a0 * to_float(bm[2 * j]);
      }
    }
    for (int64_t j = 0; j < n; ++j) c[r * ldc + j] = add ? c[r * ldc + j] + acc[size_t(j)] : acc[size_t(j)];
  }
}

void detail::round_pair_rows_plain(const float* x0, const float* x1, int64_t n, bf16* out) {
  for (int64_t j = 0; j < n; ++j) {
    out[2 * j] = round_to_bf16(x0[j]);
    out[2 * j + 1] = x1 ? round_to_bf16(x1[j]) : bf16(0);
  }
}

}  // namespace folio::kernels::attention_tiles_bf16
