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

// Isa::panel<R, Groups>: out (R, Groups * 8) = sums of the Groups groups from G on
// (nb blocks each, one after the other), Groups from 1 to Isa::kGroups, against the
// R quantized activation rows at x (R, nb * 32) with scales xs (R, nb), and, for a
// kernel that needs one, an int32 term per activation block xterm (R, nb) (nullptr
// for the others). A kernel with wider vectors takes two groups at once, so each
// activation quad it broadcasts meets 16 weight rows.
inline constexpr int64_t kPanelColumns = 2 * kQ8Group;
using PanelFn = void (*)(const BlockQ8x8* G, const int8_t* x, const float* xs, const int32_t* xterm, int64_t nb,
                         float (*out)[kPanelColumns]);

// Isa's panels of 1..kRows rows against Groups groups: [R - 1] takes R rows.
template <class Isa, int kRows, int Groups>
constexpr std::array<PanelFn, kRows> panels_of_groups() {
  return []<size_t... R>(std::index_sequence<R...>) {
    return std::array<PanelFn, kRows>{&Isa::template panel<int(R) + 1, Groups>...};
  }(std::make_index_sequence<kRows>{});
}

// y (M, N) columns of groups [first_group, last_group), as q8x8_rows says; xterm
// (M, nb) or nullptr, handed to the panels row for row with x.
template <class Isa, int kRows>
void rows_by_panels(const BlockQ8x8* P, const int8_t* x, const float* xscale, const int32_t* xterm, float* y,
                    int64_t M, int64_t N, int64_t K, const float* bias, int64_t first_group, int64_t last_group) {
  constexpr int kGroups = Isa::kGroups;
  static_assert(kGroups * kQ8Group <= kPanelColumns);
  // panels[Groups - 1][R - 1]: R rows against Groups groups.
  static constexpr auto panels = []<size_t... G>(std::index_sequence<G...>) {
    return std::array<std::array<PanelFn, kRows>, kGroups>{panels_of_groups<Isa, kRows, int(G) + 1>()...};
  }(std::make_index_sequence<kGroups>{});
  const int64_t nb = q8_blocks(K);
  const int64_t tile = std::max<int64_t>(1, (int64_t(128) << 10) / (nb * kQ8Block) / kRows) * kRows;
  alignas(64) float out[kRows][kPanelColumns];
  int64_t step = 1;  // groups a panel takes
  if constexpr (kGroups > 1) step = M >= Isa::kGroupsFromRows ? kGroups : 1;
  for (int64_t m0 = 0; m0 < M; m0 += tile) {
    const int64_t m_end = std::min(M, m0 + tile);
    for (int64_t g = first_group; g < last_group; g += step) {
      const int64_t groups = std::min<int64_t>(step, last_group - g);
      const int64_t n = g * kQ8Group, columns = std::min(groups * kQ8Group, N - n);
      for (int64_t m = m0; m < m_end; m += kRows) {
        const int64_t rows = std::min<int64_t>(kRows, m_end - m);
        panels[size_t(groups - 1)][size_t(rows - 1)](P + g * nb, x + m * nb * kQ8Block, xscale + m * nb,
                                                     xterm ? xterm + m * nb : nullptr, nb, out);
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t c = 0; c < columns; ++c) y[(m + i) * N + n + c] = out[i][c] + (bias ? bias[n + c] : 0.0f);
      }
    }
  }
}

}  // namespace folio::kernels::detail
