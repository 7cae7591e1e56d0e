#pragma once
// The loop every q8x8_rows kernel shares (quant_x8_avx2.cpp, quant_vnni.cpp): the
// groups of 8 weight rows in [first_group, last_group), each against panels of up to
// kRows activation rows at a time, which an instruction set's panel function computes.
// A panel keeps a block's weights in registers for all its rows, so that a prompt's
// rows read each weight vector once per panel; a decode step is a panel of one row.
// The activation rows go in tiles of about 128 KiB of quants, which stay in L2 while
// the group range's weights pass over them.
#include <algorithm>
#include <cstdint>

#include "infer/kernels/quant.h"

namespace folio::kernels::detail {

// out (rows, 8) = sums of group G (nb blocks) against the `rows` quantized activation
// rows at x (rows, nb * 32) with scales xs (rows, nb); rows in [1, kRows].
using PanelFn = void (*)(const BlockQ8x8* G, const int8_t* x, const float* xs, int64_t nb, int64_t rows,
                         float (*out)[kQ8Group]);

// y (M, N) columns of groups [first_group, last_group), as q8x8_rows says.
template <int kRows>
void rows_by_panels(PanelFn panel, const BlockQ8x8* P, const int8_t* x, const float* xscale, float* y, int64_t M,
                    int64_t N, int64_t K, const float* bias, int64_t first_group, int64_t last_group) {
  const int64_t nb = q8_blocks(K);
  const int64_t tile = std::max<int64_t>(1, (int64_t(128) << 10) / (nb * kQ8Block) / kRows) * kRows;
  alignas(32) float out[kRows][kQ8Group];
  for (int64_t m0 = 0; m0 < M; m0 += tile) {
    const int64_t m_end = std::min(M, m0 + tile);
    for (int64_t g = first_group; g < last_group; ++g) {
      const int64_t n = g * kQ8Group, R = std::min(kQ8Group, N - n);
      for (int64_t m = m0; m < m_end; m += kRows) {
        const int64_t rows = std::min<int64_t>(kRows, m_end - m);
        panel(P + g * nb, x + m * nb * kQ8Block, xscale + m * nb, nb, rows, out);
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t r = 0; r < R; ++r) y[(m + i) * N + n + r] = out[i][r] + (bias ? bias[n + r] : 0.0f);
      }
    }
  }
}

}  // namespace folio::kernels::detail
