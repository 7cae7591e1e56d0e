#pragma once
// The register tiles of the causal attention op (autograd/ops_causal_attention.cpp):
// one product shape, c (R rows) (+)= a b over a range of k, in vectors of the CPU's
// widest registers. Its own file so the op's file holds the op.
#include <cstdint>
#include <cstring>

namespace folio::kernels::attention_tiles {

// One register of floats (GCC/Clang vector extension): a zmm, ymm or xmm.
// A 64-byte vector on AVX2 is not two registers to GCC but an object it splits through
// the stack: that ran this op 6 to 9 times slower on one AVX2 core (bench_ops
// CausalAttention: 8-12 GFLOP/s, against 47-75 with ymm vectors). Slices are padded to
// multiples of W = 16 floats (a multiple of any of them), so no loop has a scalar tail.
#if defined(__AVX512F__)
using vec = float __attribute__((vector_size(64)));
#elif defined(__AVX__)
using vec = float __attribute__((vector_size(32)));
#else
using vec = float __attribute__((vector_size(16)));
#endif
constexpr int64_t L = sizeof(vec) / sizeof(float);  // lanes of one register
constexpr int64_t W = 16, R = 8;                      // tile: R rows by L (or 2 L) columns

inline vec load(const float* p) {
  vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, vec v) { std::memcpy(p, &v, sizeof v); }
inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// c[r * ldc + (0, NW L)] (+)= sum_{k0 <= k < k1} a[r * ars + k * aks] * b[k * ldb + (0, NW L)],
// r < R: the one product of the op, with a read along rows (q, pd, ds, dy) or down
// columns (pd^T, ds^T). R = 8 rows of accumulators keep both FMA pipes busy through
// their latency; with NW = 2 vectors per row, a step of k loads 10 values for 16 FMAs
// instead of 9 for 8, so the loads no longer hold the FMAs back. `Resume`: the sum goes
// on from c's values (a sum over k split into calls, taken in k's order, rounds as one
// call's), and `add` is not read.
template <int NW, bool Resume = false>
inline void tile(const float* a, int64_t ars, int64_t aks, const float* b, int64_t ldb, int64_t k0, int64_t k1,
                 float* c, int64_t ldc, bool add) {
  vec acc[R][NW] = {};
  if constexpr (Resume)
    for (int64_t r = 0; r < R; ++r)
      for (int w = 0; w < NW; ++w) acc[r][w] = load(c + r * ldc + w * L);
  for (int64_t k = k0; k < k1; ++k) {
    vec bk[NW];
    for (int w = 0; w < NW; ++w) bk[w] = load(b + k * ldb + w * L);
    const float* ak = a + k * aks;
#pragma GCC unroll 8
    for (int64_t r = 0; r < R; ++r)
      for (int w = 0; w < NW; ++w) acc[r][w] += ak[r * ars] * bk[w];
  }
#pragma GCC unroll 8
  for (int64_t r = 0; r < R; ++r)
    for (int w = 0; w < NW; ++w) {
      float* cr = c + r * ldc + w * L;
      store(cr, !Resume && add ? acc[r][w] + load(cr) : acc[r][w]);
    }
}

// Two vectors per row with AVX-512's 32 registers; one with AVX2's 16 (8 rows of two
// accumulators, two b vectors and a broadcast would not fit).
#ifdef __AVX512F__
constexpr int kWide = 2;
#else
constexpr int kWide = 1;
#endif

// Columns [0, n) of rows [0, R) (n a multiple of L): wide tiles, then a narrow one.
// Each element's sum runs over k in order either way, so the width changes no result.
template <bool Resume = false>
inline void tiles(const float* a, int64_t ars, int64_t aks, const float* b, int64_t ldb, int64_t k0, int64_t k1,
                  float* c, int64_t ldc, int64_t n, bool add = false) {
  int64_t j0 = 0;
  for (; j0 + kWide * L <= n; j0 += kWide * L)
    tile<kWide, Resume>(a, ars, aks, b + j0, ldb, k0, k1, c + j0, ldc, add);
  for (; j0 < n; j0 += L) tile<1, Resume>(a, ars, aks, b + j0, ldb, k0, k1, c + j0, ldc, add);
}
// c's rows [0, R) (+)= ..., the sums going on from c's values (tile's Resume).
inline void tiles_resumed(const float* a, int64_t ars, int64_t aks, const float* b, int64_t ldb, int64_t k0,
                          int64_t k1, float* c, int64_t ldc, int64_t n) {
  tiles<true>(a, ars, aks, b, ldb, k0, k1, c, ldc, n);
}

}  // namespace folio::kernels::attention_tiles
