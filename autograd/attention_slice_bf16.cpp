// One causal attention slice in bf16: the fp32 form's six products (q k^T and pd v
// forward; dy v^T, ds k, ds^T q and pd^T dy backward) on bf16 operands, each summed in
// fp32 by kernels::attention_tiles_bf16 over the keys j <= i only. The softmax, the
// dropout and the softmax's backward are the fp32 form's, on fp32 rows. The forward
// keeps each row's softmax statistics, not the (T, T) weights: the backward recomputes
// the weights, block by block, from q k^T (a seventh product, which measured no slower
// at GPT-2 small's shape than reading the weights back from memory).
//
// The tiles take their right operand as pair rows (two rows of it interleaved), so each
// operand is rounded once into the layout its product reads:
//   q k^T:  q scaled, rows;        k as pair rows of k^T (k's own rows, in pairs of dims)
//   pd v:   pd rows;               v as pair rows
//   dy v^T: dy rows;               v as pair rows of v^T
//   ds k:   ds rows;               k as pair rows
// The two products that sum over queries, ds^T q and pd^T dy, are computed transposed,
// dk^T = q^T ds and dv^T = dy^T pd, so that their left operands are q^T and dy^T (T x hs
// each, cheap to transpose) and ds and pd are read as pair rows, written as each block
// of their rows is made. Key j of a (hsp, Tp) result gathers the queries from the start
// of j's block of columns on: the causal zeros above are not multiplied.
#include <algorithm>

#include "autograd/attention_slice.h"
#include "autograd/kernels/attention_tiles_bf16.h"

namespace folio::attention_slice {
namespace {

using kernels::bf16;
namespace tiles16 = kernels::attention_tiles_bf16;

// Rows [t0, t0 + count) of x (T, hs) times scale, rounded into dst's rows (ldd apart,
// hsp long): zeros past hs and from row T on.
void round_rows(Rows x, int64_t t0, int64_t count, float scale, const Dims& d, Bf16Scratch& s, bf16* dst,
                int64_t ldd) {
  for (int64_t t = t0; t < t0 + count; ++t) {
    bf16* out = dst + (t - t0) * ldd;
    if (t >= d.T) {
      std::fill(out, out + d.hsp, bf16(0));
      continue;
    }
    const float* row = x.data + t * x.ld;
    if (scale != 1.0f) {
      for (int64_t c = 0; c < d.hs; ++c) s.scaled[size_t(c)] = scale * row[c];
      row = s.scaled.data();
    }
    kernels::to_bf16_row(row, out, d.hs);
    std::fill(out + d.hs, out + d.hsp, bf16(0));
  }
}

// x (T, hs) times scale -> (Tp, hsp) bf16 rows, zeros around.
void pack_rows(Rows x, float scale, const Dims& d, Bf16Scratch& s, bf16* out) {
  round_rows(x, 0, d.Tp, scale, d, s, out, d.hsp);
}

// Transposes go through blocks of kBlock rows (the scratch's `rows`), so that each
// column of the block is written as one contiguous run: element by element, the
// writes were Tp apart, and a power-of-two stride keeps hitting the same cache set.
constexpr int64_t kBlock = W;

// out[c ldo + t] = in[t ldi + c] for t < kBlock, c < cols, with elements of E bf16s
// (strides count elements).
template <int64_t E>
void transpose_block(const bf16* in, int64_t ldi, int64_t cols, bf16* out, int64_t ldo) {
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t t = 0; t < kBlock; ++t) std::memcpy(out + E * (c * ldo + t), in + E * (t * ldi + c), E * sizeof(bf16));
}

// x (T, hs) -> x^T (hsp, Tp) bf16 rows, zeros around.
void pack_transposed(Rows x, const Dims& d, Bf16Scratch& s, bf16* out) {
  for (int64_t t0 = 0; t0 < d.Tp; t0 += kBlock) {
    round_rows(x, t0, kBlock, 1.0f, d, s, s.rows.data(), d.hsp);
    transpose_block<1>(s.rows.data(), d.hsp, d.hsp, out + t0, d.Tp);
  }
}

// x (T, hs) -> pair rows of x (Tp / 2 of hsp pairs): pair row m is rows 2m and 2m + 1.
void pack_pair_rows(Rows x, const Dims& d, bf16* out) {
  std::fill(out, out + d.Tp * d.hsp, bf16(0));
  for (int64_t t = 0; t < d.T; t += 2)
    tiles16::round_pair_rows(x.data + t * x.ld, t + 1 < d.T ? x.data + (t + 1) * x.ld : nullptr, d.hs,
                             out + t * d.hsp);
}

// x (T, hs) -> pair rows of x^T (hsp / 2 of Tp pairs): pair row m holds dims 2m and
// 2m + 1 of each row of x, which is x's own rounded row in 32-bit steps.
void pack_pair_rows_transposed(Rows x, const Dims& d, Bf16Scratch& s, bf16* out) {
  for (int64_t t0 = 0; t0 < d.Tp; t0 += kBlock) {
    round_rows(x, t0, kBlock, 1.0f, d, s, s.rows.data(), d.hsp);  // an odd hs's last pair is (x, 0)
    transpose_block<2>(s.rows.data(), d.hsp / 2, d.hsp / 2, out + 2 * t0, d.Tp);
  }
}

// A block of R rows of x (rows Tp apart) as bf16 rows, their first n columns (what the
// products along rows read), and as pair rows, with zeros from n to n + W: the products
// down columns read row i up to the end of its block of 2 W columns.
void round_block(const float* x, int64_t n, const Dims& d, bf16* rows, bf16* pairs) {
  const int64_t Tp = d.Tp;
  if (rows)
    for (int64_t r = 0; r < R; ++r) kernels::to_bf16_row(x + r * Tp, rows + r * Tp, n);
  for (int64_t r = 0; r < R; r += 2) {
    bf16* pair_row = pairs + r * Tp;  // pair row r / 2 of the block, Tp pairs
    tiles16::round_pair_rows(x + r * Tp, x + (r + 1) * Tp, n, pair_row);
    std::fill(pair_row + 2 * n, pair_row + 2 * std::min(Tp, n + W), bf16(0));
  }
}

// Rows [i0, i0 + R) of the weights into p (rows Tp apart), over the first n columns,
// from scale q's rows (qs) and k^T's pair rows (kt): the forward's softmax, or its
// recomputation from the statistics it kept.
template <auto softmax>
void weights(const bf16* qs, const bf16* kt, float* p, int64_t i0, int64_t n, const Dims& d, RowStats stats) {
  tiles16::tiles(qs + i0 * d.hsp, d.hsp / 2, kt, d.Tp, 0, d.hsp / 2, p, d.Tp, n, false);
  softmax(p, i0, d.T, n, d.Tp, stats);
}

// ct (hsp, Tp) = a (hsp rows of Tp: q^T or dy^T) times b (pair rows of ds or pd): column
// j sums the queries from j's block of 32 on, where the causal zeros end.
void transposed_product(const bf16* a, const bf16* b, float* ct, const Dims& d) {
  const int64_t Tp = d.Tp, pairs = Tp / 2;
  for (int64_t j0 = 0; j0 < Tp; j0 += 2 * W) {
    const int64_t n = std::min(2 * W, Tp - j0);
    for (int64_t r0 = 0; r0 < d.hsp; r0 += R)
      tiles16::tiles(a + r0 * Tp, pairs, b + 2 * j0, Tp, j0 / 2, pairs, ct + r0 * Tp + j0, Tp, n, false);
  }
}

// out (T, hs) (+)= the valid part of ct^T, kBlock rows of it at a time: each block's
// columns are copied out of ct in contiguous runs into the scratch's (hsp, kBlock)
// `block`, then read along its columns.
void store_transposed(const float* ct, Out out, const Dims& d, Bf16Scratch& s) {
  float* block = s.block.data();  // (hsp, kBlock)
  for (int64_t t0 = 0; t0 < d.T; t0 += kBlock) {
    for (int64_t c = 0; c < d.hs; ++c) std::copy(ct + c * d.Tp + t0, ct + c * d.Tp + t0 + kBlock, block + c * kBlock);
    for (int64_t t = t0; t < std::min(d.T, t0 + kBlock); ++t) {
      float* dst = out.data + t * out.ld;
      const float* src = block + (t - t0);
      if (out.add) {
        for (int64_t c = 0; c < d.hs; ++c) dst[c] += src[c * kBlock];
      } else {
        for (int64_t c = 0; c < d.hs; ++c) dst[c] = src[c * kBlock];
      }
    }
  }
}

}  // namespace

void forward_slice(Rows q, Rows k, Rows v, RowStats stats, Out y, Bf16Scratch& scratch, const Dims& d, float scale,
                   const Drop& drop) {
  const int64_t Tp = d.Tp, hsp = d.hsp;
  bf16* qs = scratch.h.data();  // (Tp, hsp) scale q
  bf16* kt = qs + Tp * hsp;     // (hsp / 2, Tp) pair rows of k^T
  bf16* vr = kt + Tp * hsp;     // (Tp / 2, hsp) pair rows of v
  bf16* pd16 = vr + Tp * hsp;   // (R, Tp) a block of pd
  float* ybuf = scratch.f.data();  // (Tp, hsp) y, when padded
  float* p = ybuf + Tp * hsp;      // (R, Tp) a block of weights
  float* dropped = p + R * Tp;     // (R, Tp) the block with dropout
  pack_rows(q, scale, d, scratch, qs);
  pack_pair_rows_transposed(k, d, scratch, kt);
  pack_pair_rows(v, d, vr);
  into(y, ybuf, d, [&](float* c, int64_t ldc, bool add) {
    for (int64_t i0 = 0; i0 < Tp; i0 += R) {
      const int64_t n = visible(i0);
      weights<softmax_rows>(qs, kt, p, i0, n, d, stats);
      const float* pd = p;
      if (drop.mask) drop_rows(p, dropped, i0, n, d.Tp, d, drop), pd = dropped;
      for (int64_t r = 0; r < R; ++r) kernels::to_bf16_row(pd + r * Tp, pd16 + r * Tp, n);
      tiles16::tiles(pd16, Tp / 2, vr, hsp, 0, n / 2, c + i0 * ldc, ldc, hsp, add);
    }
  });
}

void backward_slice(Rows q, Rows k, Rows v, RowStats stats, Rows dy, Out dq, Out dk, Out dv, Bf16Scratch& scratch,
                    const Dims& d, float scale, const Drop& drop) {
  const int64_t Tp = d.Tp, hsp = d.hsp;
  bf16* dyr = scratch.h.data();  // (Tp, hsp) dy
  bf16* vt = dyr + Tp * hsp;     // (hsp / 2, Tp) pair rows of v^T
  bf16* kr = vt + Tp * hsp;      // (Tp / 2, hsp) pair rows of k
  bf16* qt = kr + Tp * hsp;      // (hsp, Tp) q^T
  bf16* dyt = qt + Tp * hsp;     // (hsp, Tp) dy^T
  bf16* qs = dyt + Tp * hsp;     // (Tp, hsp) scale q
  bf16* kt = qs + Tp * hsp;      // (hsp / 2, Tp) pair rows of k^T
  bf16* ds16 = kt + Tp * hsp;    // (Tp, Tp) ds
  bf16* ds2 = ds16 + Tp * Tp;    // (Tp / 2, Tp) pair rows of ds
  bf16* pd2 = ds2 + Tp * Tp;     // (Tp / 2, Tp) pair rows of pd
  float* out = scratch.f.data();  // (Tp, hsp) dq when padded, or (hsp, Tp) dk^T, dv^T
  float* p = out + Tp * hsp;      // (R, Tp) a block of weights
  float* dropped = p + R * Tp;    // (R, Tp) the block with dropout
  float* ds = dropped + R * Tp;   // (R, Tp) the block's dpd, then ds
  pack_rows(dy, 1.0f, d, scratch, dyr);
  pack_pair_rows_transposed(v, d, scratch, vt);
  pack_pair_rows(k, d, kr);
  pack_transposed(q, d, scratch, qt);
  pack_transposed(dy, d, scratch, dyt);
  pack_rows(q, scale, d, scratch, qs);
  pack_pair_rows_transposed(k, d, scratch, kt);
  for (int64_t i0 = 0; i0 < Tp; i0 += R) {
    const int64_t n = visible(i0);
    weights<softmax_rows_again>(qs, kt, p, i0, n, d, stats);
    const float* pd = p;
    if (drop.mask) drop_rows(p, dropped, i0, n, d.Tp, d, drop), pd = dropped;
    tiles16::tiles(dyr + i0 * hsp, hsp / 2, vt, Tp, 0, hsp / 2, ds, Tp, n, false);
    softmax_backward_rows(p, pd, ds, n, Tp, scale, drop.mask != nullptr);
    round_block(ds, n, d, ds16 + i0 * Tp, ds2 + i0 * Tp);
    round_block(pd, n, d, nullptr, pd2 + i0 * Tp);
  }
  into(dq, out, d, [&](float* c, int64_t ldc, bool add) {
    for (int64_t i0 = 0; i0 < Tp; i0 += R)
      tiles16::tiles(ds16 + i0 * Tp, Tp / 2, kr, hsp, 0, visible(i0) / 2, c + i0 * ldc, ldc, hsp, add);
  });
  transposed_product(qt, ds2, out, d);
  store_transposed(out, dk, d, scratch);
  transposed_product(dyt, pd2, out, d);
  store_transposed(out, dv, d, scratch);
}

}  // namespace folio::attention_slice
