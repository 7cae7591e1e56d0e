// The decoder's layout of Q8_0 blocks (BlockQ8x8, quant.h): the repacking, rows back
// to floats, the plain integer product on it, and the choice of the fastest kernel the
// CPU runs (AVX2 quant_x8_avx2.cpp, AVX-512 VNNI quant_vnni.cpp).
#include <algorithm>
#include <cstring>

#include "infer/kernels/quant.h"

namespace folio::kernels {

void repack_q8x8(const BlockQ8* W, int64_t N, int64_t K, BlockQ8x8* out) {
  const int64_t nb = q8_blocks(K);
  for (int64_t g = 0; g < q8x8_groups(N); ++g)
    for (int64_t b = 0; b < nb; ++b) {
      BlockQ8x8& dst = out[g * nb + b];
      std::memset(&dst, 0, sizeof dst);  // rows past N: scale 0, quants 0
      for (int64_t r = 0; r < kQ8Group && g * kQ8Group + r < N; ++r) {
        const BlockQ8& src = W[(g * kQ8Group + r) * nb + b];
        dst.scale[r] = src.scale;
        for (int64_t i = 0; i < kQ8Block / kQ8Quad; ++i) std::memcpy(dst.q[i][r], src.q + i * kQ8Quad, kQ8Quad);
      }
    }
}

void dequantize_q8x8_row(const BlockQ8x8* P, int64_t n, int64_t K, float* w) {
  const int64_t nb = q8_blocks(K), r = n % kQ8Group;
  const BlockQ8x8* group = P + n / kQ8Group * nb;
  for (int64_t k = 0; k < K; ++k) {
    const BlockQ8x8& blk = group[k / kQ8Block];
    w[k] = fp16_to_float(blk.scale[r]) * float(blk.at(r, k % kQ8Block));
  }
}

namespace detail {

void dequantize_q8x8_groups_plain(const BlockQ8x8* P, int64_t first_group, int64_t last_group, int64_t N, int64_t K,
                                  float* w) {
  for (int64_t n = first_group * kQ8Group; n < std::min(N, last_group * kQ8Group); ++n)
    dequantize_q8x8_row(P, n, K, w + (n - first_group * kQ8Group) * K);
}

// Group by group, row by row: each block's exact int32 sum scaled by (weight scale *
// activation scale) and added in block order.
void q8x8_rows_plain(const BlockQ8x8* P, const int8_t* xq, const float* xscale, float* y, int64_t M, int64_t N,
                     int64_t K, const float* bias, int64_t first_group, int64_t last_group) {
  const int64_t nb = q8_blocks(K);
  for (int64_t g = first_group; g < last_group; ++g) {
    const BlockQ8x8* group = P + g * nb;
    const int64_t rows = std::min(kQ8Group, N - g * kQ8Group);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t r = 0; r < rows; ++r) {
        float sum = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          const int8_t* xb = xq + (m * nb + b) * kQ8Block;
          int32_t s = 0;  // at most 32 * 127 * 127: exact
          for (int64_t i = 0; i < kQ8Block; ++i) s += int32_t(group[b].at(r, i)) * int32_t(xb[i]);
          sum += fp16_to_float(group[b].scale[r]) * xscale[m * nb + b] * float(s);
        }
        const int64_t n = g * kQ8Group + r;
        y[m * N + n] = sum + (bias ? bias[n] : 0.0f);
      }
  }
}

}  // namespace detail

void dequantize_q8x8_groups(const BlockQ8x8* P, int64_t first_group, int64_t last_group, int64_t N, int64_t K,
                            float* w) {
  detail::avx2_fma_f16c() ? detail::dequantize_q8x8_groups_avx2(P, first_group, last_group, N, K, w)
                          : detail::dequantize_q8x8_groups_plain(P, first_group, last_group, N, K, w);
}

const std::vector<IntegerKernel>& integer_kernels() {
  static const std::vector<IntegerKernel> kernels =
      runnable<Q8x8Rows>({{{"plain", detail::q8x8_rows_plain}, true},
                          {{"avx2", detail::q8x8_rows_avx2}, detail::avx2_fma_f16c()},
                          {{"vnni", detail::q8x8_rows_vnni}, detail::avx512_vnni()}});
  return kernels;
}

const IntegerKernel* find_integer_kernel(std::string_view name) {
  for (const IntegerKernel& k : integer_kernels())
    if (name == k.name) return &k;
  return nullptr;
}

void q8x8_rows(const BlockQ8x8* P, const int8_t* xq, const float* xscale, float* y, int64_t M, int64_t N, int64_t K,
               const float* bias, int64_t first_group, int64_t last_group) {
  static Q8x8Rows* const fastest = integer_kernels().back().rows;
  fastest(P, xq, xscale, y, M, N, K, bias, first_group, last_group);
}

}  // namespace folio::kernels
