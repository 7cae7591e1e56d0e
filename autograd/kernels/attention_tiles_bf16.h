#pragma once
// The bf16 twin of attention_tiles.h for the causal attention's bf16 slices
// (autograd/attention_slice_bf16.cpp): the same product c (R rows) (+)= a b, from bf16
// operands summed in fp32, on AVX512-BF16's vdpbf16ps where the CPU has it and in plain
// loops elsewhere (and as the tests' oracle).
//
// vdpbf16ps multiplies bf16 pairs: lane j of the result gains a[2j] b[2j] + a[2j + 1]
// b[2j + 1]. So the operands come in pairs along the summed dimension k: a is an
// ordinary bf16 row-major matrix (its pair m is elements 2m and 2m + 1 of a row, one
// 32-bit broadcast), while b's "pair rows" interleave two rows of the (K, N) matrix:
// pair row m holds (b[2m][j], b[2m + 1][j]) for each column j, at element 2 (m ldb + j).
// Strides count pairs.
#include <cstdint>

#include "autograd/kernels/matmul.h"

namespace folio::kernels::attention_tiles_bf16 {

// c[r * ldc + (0, n)] (+)= sum over pairs m in [m0, m1) of a's pair (r, m) times b's
// pair row m, for r < 8 (attention_tiles::R): a's rows ars pairs apart, b's pair rows
// ldb pairs apart. n a multiple of 16.
void tiles(const bf16* a, int64_t ars, const bf16* b, int64_t ldb, int64_t m0, int64_t m1, float* c, int64_t ldc,
           int64_t n, bool add);

// Pair rows from two fp32 rows of n elements: out[2j] = x0[j], out[2j + 1] = x1[j],
// rounded as to_bf16 rounds; x1 null: zeros.
void round_pair_rows(const float* x0, const float* x1, int64_t n, bf16* out);

// Whether tiles() runs on vdpbf16ps (AVX512-BF16) rather than plain loops.
bool native();

namespace detail {
void tiles_plain(const bf16* a, int64_t ars, const bf16* b, int64_t ldb, int64_t m0, int64_t m1, float* c,
                 int64_t ldc, int64_t n, bool add);
void round_pair_rows_plain(const float* x0, const float* x1, int64_t n, bf16* out);
}  // namespace detail

}  // namespace folio::kernels::attention_tiles_bf16
