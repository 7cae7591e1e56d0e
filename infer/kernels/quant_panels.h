#pragma once
// The loop every q8x8_rows kernel shares (quant_x8_avx2.cpp, quant_vnni.cpp): the
// groups of 8 weight rows in [first_group, last_group), each against panels of up to
// kRows activation rows at a time, which an instruction set's Isa::panel<R> computes.
// A panel keeps a block's weights in registers for all its rows, so that a prompt's
// rows read each weight vector once per panel; a decode step is a panel of one row.
// The activation rows go in tiles of about 128 KiB of quants, which stay in L2 while
// the group range's weights pass over them.
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "infer/kernels/quant.h"

namespace folio::kernels::detail {

// The lines of the block 4 ahead of blk (1088 bytes) into L1: a group's blocks are
// one sequential stream, but a block's work for one row (a decode step) is short
// enough that the hardware prefetcher alone falls behind.
inline void prefetch_ahead(const BlockQ8x8& blk) {
  const char* ahead = reinterpret_cast<const char*>(&blk) + 4 * sizeof(BlockQ8x8);
  for (size_t line = 0; line < sizeof(BlockQ8x8); line += 64) __builtin_prefetch(ahead + line, 0, 3);
}

// Isa::panel<R>: out (R, 8) = sums of group G (nb blocks) against the R quantized
// activation rows at x (R, nb * 32) with scales xs (R, nb).
using PanelFn = void (*)(const BlockQ8x8* G, const int8_t* x, const float* xs, int64_t nb, float (*out)[kQ8Group]);

// y (M, N) columns of groups [first_group, last_group), as q8x8_rows says.
template <class Isa, int kRows>
void rows_by_panels(const BlockQ8x8* P, const int8_t* x, const float* xscale, float* y, int64_t M, int64_t N,
                    int64_t K, const float* bias, int64_t first_group, int64_t last_group) {
  static constexpr std::array<PanelFn, kRows> panels = []<size_t... R>(std::index_sequence<R...>) {
    return std::array<PanelFn, kRows>{&Isa::template panel<int(R) + 1>...};  // panels[R - 1]: R rows
  }(std::make_index_sequence<kRows>{});
  const int64_t nb = q8_blocks(K);
  const int64_t tile = std::max<int64_t>(1, (int64_t(128) << 10) / (nb * kQ8Block) / kRows) * kRows;
  alignas(32) float out[kRows][kQ8Group];
  for (int64_t m0 = 0; m0 < M; m0 += tile) {
    const int64_t m_end = std::min(M, m0 + tile);
    for (int64_t g = first_group; g < last_group; ++g) {
      const int64_t n = g * kQ8Group, R = std::min(kQ8Group, N - n);
      for (int64_t m = m0; m < m_end; m += kRows) {
        const int64_t rows = std::min<int64_t>(kRows, m_end - m);
        panels[size_t(rows - 1)](P + g * nb, x + m * nb * kQ8Block, xscale + m * nb, nb, out);
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t r = 0; r < R; ++r) y[(m + i) * N + n + r] = out[i][r] + (bias ? bias[n + r] : 0.0f);
      }
    }
  }
}

}  // namespace folio::kernels::detail
