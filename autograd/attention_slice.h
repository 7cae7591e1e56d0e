#pragma once
// The pieces a causal attention slice (one (batch, head) pair: q, k, v (T, hs)) is made
// of, shared by its fp32 form (ops_causal_attention.cpp) and its bf16 form
// (attention_slice_bf16.cpp): sizes and padding, the causal softmax over a block of
// rows, the weights' dropout, and the softmax's backward. Everything here is fp32.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/kernels/attention_tiles.h"
#include "autograd/kernels/dropout_mask.h"
#include "autograd/kernels/matmul.h"
#include "autograd/kernels/vecmath.h"

namespace folio::attention_slice {

using namespace kernels::attention_tiles;  // vec, its lanes L, W, R, load, store, tiles

// A slice's sizes: T queries (= keys) of hs dims, padded to Tp and hsp (multiples of W).
// The fp32 form's buffers of Tp columns (the (Tp, Tp) weights, the (hsp, Tp) k^T and v^T
// whose rows every block's first product reads) have rows ld apart: Tp, or W more where
// Tp is an even number of W, so that a column's elements fall in different cache sets.
// At Tp 1024 rows 4 KiB apart all fell in one set of L1 (GPT-2 small's step on an AVX2
// CPU: the attention's share of it 17.1 % with rows Tp apart, 16.0 % with ld).
struct Dims {
  int64_t T, hs, Tp, hsp, ld;
  Dims(int64_t T, int64_t hs)
      : T(T), hs(hs), Tp(round_up(T, W)), hsp(round_up(hs, W)), ld(Tp / W % 2 ? Tp : Tp + W) {}
  bool padded() const { return Tp != T || hsp != hs; }
};

// A slice's rows in memory: row t at data + t * ld.
struct Rows {
  const float* data;
  int64_t ld;
};

// A slice's output (T, hs), row t at data + t * ld: stored, or added when `add`.
struct Out {
  float* data;
  int64_t ld;
  bool add;
};

// out = the valid part of xp (Tp, hsp).
inline void unpad(const float* xp, Out out, const Dims& d) {
  for (int64_t t = 0; t < d.T; ++t) {
    const float* src = xp + t * d.hsp;
    float* dst = out.data + t * out.ld;
    if (out.add) {
#pragma omp simd
      for (int64_t c = 0; c < d.hs; ++c) dst[c] += src[c];
    } else {
      std::copy(src, src + d.hs, dst);
    }
  }
}

// Runs `tiles(c, ldc, add)`, which writes a (Tp, hsp) result, into out: in place when
// no padding is needed, else through buffer.
template <class Tiles>
void into(Out out, float* buffer, const Dims& d, Tiles tiles) {
  if (!d.padded()) return tiles(out.data, out.ld, out.add);
  tiles(buffer, d.hsp, false);
  unpad(buffer, out, d);
}

// Dropout on a slice's weights: weight (i, j) is element base + i * T + j of the
// composition's weight tensor. No mask: no dropout.
struct Drop {
  const kernels::DropoutMask* mask;
  int64_t base;
};

// Rows [i0, i0 + R) of a causal (Tp, Tp) product need the key tiles up to the one
// holding key i0 + R - 1: columns [0, visible(i0)).
inline int64_t visible(int64_t i0) { return (i0 / W + 1) * W; }

// op over x's lanes, by halves (a loop over the lanes would be L dependent steps).
using v4 = float __attribute__((vector_size(16)));
using v8 = float __attribute__((vector_size(32)));
template <class Half, class V, class Op>
Half fold_halves(V x, Op op) {
  Half a, b;
  std::memcpy(&a, &x, sizeof a);
  std::memcpy(&b, reinterpret_cast<const char*>(&x) + sizeof a, sizeof b);
  return op(a, b);
}
template <class V, class Op>  // a template, so that only the branch for V compiles
float reduce_lanes(V x, Op op) {
  if constexpr (sizeof(V) == sizeof(v4)) {
    return op(op(x[0], x[1]), op(x[2], x[3]));
  } else if constexpr (sizeof(V) == sizeof(v8)) {
    return reduce_lanes(fold_halves<v4>(x, op), op);
  } else {
    return reduce_lanes(fold_halves<v8>(x, op), op);
  }
}
constexpr auto kMax = [](auto a, auto b) { return a > b ? a : b; };
constexpr auto kSum = [](auto a, auto b) { return a + b; };

// The softmax's statistics of a slice's rows: row i's max and the inverse of its
// exps' sum, (Tp) each. The bf16 form's forward keeps them instead of the (Tp, Tp)
// weights, and its backward recomputes the weights from the scores with them, bit for
// bit. None (null): not kept.
struct RowStats {
  float *max = nullptr, *inv_sum = nullptr;
  static RowStats in(float* kept, const Dims& d) { return {kept, kept + d.Tp}; }  // kept (2, Tp)
};

// Row i of a block of scores, keys from i + 1 on set to -inf (whose exp is 0), over the
// first n (a multiple of L): its max.
inline float mask_row(float* row, int64_t i, int64_t n) {
  vec lane;
  for (int64_t l = 0; l < L; ++l) lane[l] = float(l);
  const vec masked = vec{} - std::numeric_limits<float>::infinity();
  vec mx = masked;
  for (int64_t j0 = 0; j0 < n; j0 += L) {
    vec x = load(row + j0);
    x = lane + float(j0) <= float(i) ? x : masked;
    mx = kMax(x, mx);
    store(row + j0, x);
  }
  return reduce_lanes(mx, kMax);
}
inline void exp_row(float* row, float max, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) row[j] = kernels::fast_exp(row[j] - max);
}
inline void scale_row(float* row, float by, int64_t n) {
  const vec s = vec{} + by;
  for (int64_t j0 = 0; j0 < n; j0 += L) store(row + j0, load(row + j0) * s);
}

// A block of rows [i0, i0 + R) (p's rows Tp apart, row i0 first) holds their scores
// over the first n columns (n a multiple of W, > i0 + R - 1): row i becomes
// softmax(row[0, i]), zero on to column n, and stats (if any) gets each row's
// statistics (at i). Rows from T on become zero. Columns from n on of the other rows are
// not written: no product reads them. Stage by stage over the rows, so that the rows'
// exps overlap in the pipeline: per row (and with per-element loops) this ran at a third
// of the speed.
inline void softmax_rows(float* p, int64_t i0, int64_t T, int64_t n, int64_t Tp, RowStats stats = {}) {
  const int64_t rows = std::clamp<int64_t>(T - i0, 0, R);
  float max[R];
  for (int64_t r = 0; r < rows; ++r) max[r] = mask_row(p + r * Tp, i0 + r, n);
  for (int64_t r = 0; r < rows; ++r) exp_row(p + r * Tp, max[r], n);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = p + r * Tp;
    vec total{};
    for (int64_t j0 = 0; j0 < n; j0 += L) total += load(row + j0);
    const float inv_sum = 1.0f / reduce_lanes(total, kSum);
    scale_row(row, inv_sum, n);
    if (stats.max) stats.max[i0 + r] = max[r], stats.inv_sum[i0 + r] = inv_sum;
  }
  std::fill(p + rows * Tp, p + R * Tp, 0.0f);  // padding rows
}

// softmax_rows again, from the same scores and the statistics it kept: the same weights,
// bit for bit, by the same stages.
inline void softmax_rows_again(float* p, int64_t i0, int64_t T, int64_t n, int64_t Tp, RowStats stats) {
  const int64_t rows = std::clamp<int64_t>(T - i0, 0, R);
  for (int64_t r = 0; r < rows; ++r) mask_row(p + r * Tp, i0 + r, n);
  for (int64_t r = 0; r < rows; ++r) exp_row(p + r * Tp, stats.max[i0 + r], n);
  for (int64_t r = 0; r < rows; ++r) scale_row(p + r * Tp, stats.inv_sum[i0 + r], n);
  std::fill(p + rows * Tp, p + R * Tp, 0.0f);
}

// A block of rows [i0, i0 + R) of pd = p with dropout, over their first n (a multiple
// of W, > i0 + R - 1) columns: where the products read them. Both blocks' rows are ld
// apart, row i0 first.
inline void drop_rows(const float* p, float* pd, int64_t i0, int64_t n, int64_t ld, const Dims& d, const Drop& drop) {
  const kernels::DropoutMask mask = *drop.mask;  // by value: the loop keeps it in registers
  for (int64_t r = 0; r < R; ++r) {
    const float* pi = p + r * ld;
    float* pdi = pd + r * ld;
    const int64_t first = drop.base + (i0 + r) * d.T;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) pdi[j] = mask.kept(first + j) ? pi[j] * mask.keep_scale : 0.0f;
  }
}

// The softmax's backward on a block of R rows (p, pd and ds's rows Tp apart, the
// block's first row first): ds holds dpd = dy v^T over their first n columns on entry.
// With D_i = sum_j pd_ij dpd_ij (= dy_i . y_i), ds = scale (pd dpd - p D), or scale p
// (dpd - D) when pd is p (`dropped` false: one rounding fewer). Columns from n on are
// not written.
inline void softmax_backward_rows(const float* p, const float* pd, float* ds, int64_t n, int64_t Tp, float scale,
                                  bool dropped) {
  for (int64_t r = 0; r < R; ++r) {
    const float *pi = p + r * Tp, *pdi = pd + r * Tp;
    float* dsi = ds + r * Tp;
    vec dot{};
    for (int64_t j0 = 0; j0 < n; j0 += L) dot += load(pdi + j0) * load(dsi + j0);
    const vec D = vec{} + reduce_lanes(dot, kSum);
    if (!dropped) {
      for (int64_t j0 = 0; j0 < n; j0 += L) store(dsi + j0, scale * load(pi + j0) * (load(dsi + j0) - D));
    } else {
      for (int64_t j0 = 0; j0 < n; j0 += L)
        store(dsi + j0, scale * (load(pdi + j0) * load(dsi + j0) - load(pi + j0) * D));
    }
  }
}

// A kept scratch buffer holds at least n elements afterwards; it never shrinks.
template <class V>
void grow_to(V& v, int64_t n) {
  if (int64_t(v.size()) < n) v.resize(size_t(n));
}

// ---- The bf16 form (attention_slice_bf16.cpp). q, k, v and dy are rounded to bf16, the
// weights (with dropout) before they multiply v and dy, and ds before it multiplies k and
// q; every product sums in fp32, and the softmax and its backward run in fp32 on fp32
// scores, as the fp32 form's. Unlike the fp32 form, the forward keeps no weights: the
// backward recomputes them from the scores and the softmax's statistics.

// Per-thread scratch of one bf16 slice: fp32 for one (Tp, hsp) buffer and three blocks
// of R rows of Tp, bf16 for seven (Tp, hsp) and three (Tp, Tp) buffers, and the
// packers' small ones. Kept by its thread from call to call (fresh pages cost more than
// the op), and grown when a call needs more.
struct Bf16Scratch {
  std::vector<float> f;
  std::vector<float> scaled, block;  // (hsp) a row times the scale; (hsp, W) a block of a result
  std::vector<kernels::bf16> h;
  std::vector<kernels::bf16> rows;   // (W, hsp) a block of rounded rows
  void reserve(const Dims& d, bool) {
    grow_to(f, d.Tp * d.hsp + 3 * R * d.Tp);
    grow_to(h, 7 * d.Tp * d.hsp + 3 * d.Tp * d.Tp);
    grow_to(scaled, d.hsp);
    grow_to(block, d.hsp * W);
    grow_to(rows, W * d.hsp);
  }
};
// y = pd v, one block of rows of the weights at a time; stats gets their statistics.
void forward_slice(Rows q, Rows k, Rows v, RowStats stats, Out y, Bf16Scratch& scratch, const Dims& d, float scale,
                   const Drop& drop);
// dq, dk, dv from dy and the weights recomputed with stats, as the fp32 form's backward_slice.
void backward_slice(Rows q, Rows k, Rows v, RowStats stats, Rows dy, Out dq, Out dk, Out dv, Bf16Scratch& scratch,
                    const Dims& d, float scale, const Drop& drop);

}  // namespace folio::attention_slice
