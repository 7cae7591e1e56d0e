// One causal attention slice in bf16: the fp32 form's six products (q k^T and pd v
// forward; dy v^T, ds k, ds^T q and pd^T dy backward) on bf16 operands, each summed in
// fp32 by kernels::attention_tiles_bf16 over the keys j <= i only. The softmax, the
// dropout and the softmax's backward are the fp32 form's, on fp32 rows.
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
using kernels::round_to_bf16;
namespace tiles16 = kernels::attention_tiles_bf16;

// Row t of x (T, hs) times scale, rounded into the scratch's row (hsp): one vector pass,
// from which the packers below copy or scatter.
const bf16* rounded_row(Rows x, int64_t t, float scale, const Dims& d, Bf16Scratch& s) {
  const float* row = x.data + t * x.ld;
  if (scale != 1.0f) {
    for (int64_t c = 0; c < d.hs; ++c) s.scaled[size_t(c)] = scale * row[c];
    row = s.scaled.data();
  }
  kernels::to_bf16_row(row, s.row.data(), d.hs);
  if (d.hs % 2) s.row[size_t(d.hs)] = bf16(0);  // the last pair's second half (hsp > hs)
  return s.row.data();
}

// x (T, hs) times scale -> (Tp, hsp) bf16 rows, zeros around.
void pack_rows(Rows x, float scale, const Dims& d, Bf16Scratch& s, bf16* out) {
  std::fill(out, out + d.Tp * d.hsp, bf16(0));
  for (int64_t t = 0; t < d.T; ++t) {
    const bf16* r = rounded_row(x, t, scale, d, s);
    std::copy(r, r + d.hs, out + t * d.hsp);
  }
}

// x (T, hs) -> x^T (hsp, Tp) bf16 rows, zeros around.
void pack_transposed(Rows x, const Dims& d, Bf16Scratch& s, bf16* out) {
  std::fill(out, out + d.hsp * d.Tp, bf16(0));
  for (int64_t t = 0; t < d.T; ++t) {
    const bf16* r = rounded_row(x, t, 1.0f, d, s);
    for (int64_t c = 0; c < d.hs; ++c) out[c * d.Tp + t] = r[c];
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
  std::fill(out, out + d.hsp * d.Tp, bf16(0));
  for (int64_t t = 0; t < d.T; ++t) {
    const bf16* r = rounded_row(x, t, 1.0f, d, s);  // an odd hs's last pair is (x, 0)
    for (int64_t m = 0; m < (d.hs + 1) / 2; ++m) std::copy(r + 2 * m, r + 2 * m + 2, out + 2 * (m * d.Tp + t));
  }
}

// Rows [i0, i0 + R) of x (Tp, Tp) as bf16 rows, their first n columns (what the
// products along rows read), and as pair rows, all Tp columns with zeros from n on
// (the products down columns read them whole).
void round_block(const float* x, int64_t i0, int64_t n, const Dims& d, bf16* rows, bf16* pairs) {
  const int64_t Tp = d.Tp;
  if (rows)
    for (int64_t i = i0; i < i0 + R; ++i) kernels::to_bf16_row(x + i * Tp, rows + i * Tp, n);
  for (int64_t i = i0; i < i0 + R; i += 2) {
    bf16* pair_row = pairs + i * Tp;  // pair row i / 2, Tp pairs
    tiles16::round_pair_rows(x + i * Tp, x + (i + 1) * Tp, n, pair_row);
    std::fill(pair_row + 2 * n, pair_row + 2 * Tp, bf16(0));
  }
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

// out (T, hs) (+)= the valid part of ct^T.
void store_transposed(const float* ct, Out out, const Dims& d) {
  for (int64_t t = 0; t < d.T; ++t) {
    float* dst = out.data + t * out.ld;
    for (int64_t c = 0; c < d.hs; ++c) dst[c] = out.add ? dst[c] + ct[c * d.Tp + t] : ct[c * d.Tp + t];
  }
}

}  // namespace

void forward_slice(Rows q, Rows k, Rows v, float* p, Out y, Bf16Scratch& scratch, const Dims& d, float scale,
                   const Drop& drop) {
  const int64_t Tp = d.Tp, hsp = d.hsp;
  bf16* qs = scratch.h.data();  // (Tp, hsp) scale q
  bf16* kt = qs + Tp * hsp;     // (hsp / 2, Tp) pair rows of k^T
  bf16* vr = kt + Tp * hsp;     // (Tp / 2, hsp) pair rows of v
  bf16* pd16 = vr + Tp * hsp;   // (Tp, Tp) pd
  float* ybuf = scratch.f.data();                        // (Tp, hsp) y, when padded
  float* pd = drop.mask ? ybuf + Tp * hsp : p;  // (Tp, Tp) p with dropout
  pack_rows(q, scale, d, scratch, qs);
  pack_pair_rows_transposed(k, d, scratch, kt);
  pack_pair_rows(v, d, vr);
  for (int64_t i0 = 0; i0 < Tp; i0 += R) {
    const int64_t n = visible(i0);
    tiles16::tiles(qs + i0 * hsp, hsp / 2, kt, Tp, 0, hsp / 2, p + i0 * Tp, Tp, n, false);
    softmax_rows(p + i0 * Tp, i0, d.T, n, Tp);
    if (drop.mask) drop_rows(p, pd, i0, n, d, drop);
    for (int64_t i = i0; i < i0 + R; ++i) kernels::to_bf16_row(pd + i * Tp, pd16 + i * Tp, n);
  }
  into(y, ybuf, d, [&](float* c, int64_t ldc, bool add) {
    for (int64_t i0 = 0; i0 < Tp; i0 += R)
      tiles16::tiles(pd16 + i0 * Tp, Tp / 2, vr, hsp, 0, visible(i0) / 2, c + i0 * ldc, ldc, hsp, add);
  });
}

void backward_slice(Rows q, Rows k, Rows v, const float* p, Rows dy, Out dq, Out dk, Out dv, Bf16Scratch& scratch,
                    const Dims& d, float scale, const Drop& drop) {
  const int64_t Tp = d.Tp, hsp = d.hsp;
  bf16* dyr = scratch.h.data();  // (Tp, hsp) dy
  bf16* vt = dyr + Tp * hsp;     // (hsp / 2, Tp) pair rows of v^T
  bf16* kr = vt + Tp * hsp;      // (Tp / 2, hsp) pair rows of k
  bf16* qt = kr + Tp * hsp;      // (hsp, Tp) q^T
  bf16* dyt = qt + Tp * hsp;     // (hsp, Tp) dy^T
  bf16* ds16 = dyt + Tp * hsp;   // (Tp, Tp) ds
  bf16* ds2 = ds16 + Tp * Tp;    // (Tp / 2, Tp) pair rows of ds
  bf16* pd2 = ds2 + Tp * Tp;     // (Tp / 2, Tp) pair rows of pd
  float* out = scratch.f.data();  // (Tp, hsp) dq when padded, or (hsp, Tp) dk^T, dv^T
  float* ds = out + Tp * hsp;     // (Tp, Tp) dpd, then ds
  const float* pd = p;
  if (drop.mask) {
    float* dropped = ds + Tp * Tp;  // (Tp, Tp)
    for (int64_t i0 = 0; i0 < Tp; i0 += R) drop_rows(p, dropped, i0, visible(i0), d, drop);
    pd = dropped;
  }
  pack_rows(dy, 1.0f, d, scratch, dyr);
  pack_pair_rows_transposed(v, d, scratch, vt);
  pack_pair_rows(k, d, kr);
  pack_transposed(q, d, scratch, qt);
  pack_transposed(dy, d, scratch, dyt);
  for (int64_t i0 = 0; i0 < Tp; i0 += R) {
    const int64_t n = visible(i0);
    tiles16::tiles(dyr + i0 * hsp, hsp / 2, vt, Tp, 0, hsp / 2, ds + i0 * Tp, Tp, n, false);
    softmax_backward_rows(p, pd, ds, i0, n, Tp, scale, drop.mask != nullptr);
    round_block(ds, i0, n, d, ds16, ds2);
    round_block(pd, i0, n, d, nullptr, pd2);
  }
  into(dq, out, d, [&](float* c, int64_t ldc, bool add) {
    for (int64_t i0 = 0; i0 < Tp; i0 += R)
      tiles16::tiles(ds16 + i0 * Tp, Tp / 2, kr, hsp, 0, visible(i0) / 2, c + i0 * ldc, ldc, hsp, add);
  });
  transposed_product(qt, ds2, out, d);
  store_transposed(out, dk, d);
  transposed_product(dyt, pd2, out, d);
  store_transposed(out, dv, d);
}

}  // namespace folio::attention_slice
