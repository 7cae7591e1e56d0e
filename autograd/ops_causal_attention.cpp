// Causal self-attention in one op: y = dropout(causal_softmax(q k^T, scale)) v, computed per
// (T, hs) slice without the masked half. The composition (matmul, causal_softmax,
// matmul) multiplies the full T x T square and masks half of it away afterwards, six
// times per layer counting the backward; here every product runs over the keys j <= i
// only (in tiles of 16 keys), and the scores never leave the slice. Measured on one
// core, forward + backward (bench/README.md, "bf16"): 1.37x the composition at config
// S (T 64, hs 32), 1.6x at M (T 256, hs 64); the packed form also saves the per-head
// copies around it. Dropout on the weights (nanoGPT's attn_dropout) happens inside:
// the mask is regenerated from its seed in the backward, so no (T, T) tensor besides
// the weights themselves is kept, and the dropped weights are the composition's.
//
// Slices run in parallel; each slice's sums run in a fixed order, so the result does
// not depend on the thread count.
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "base/error.h"
#include "autograd/kernels/attention_tiles.h"
#include "autograd/kernels/dropout_mask.h"
#include "autograd/kernels/vecmath.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"

namespace folio {
namespace {

using namespace kernels::attention_tiles;  // vec, its lanes L, W, R, load, store, tiles

// A slice's sizes: T queries (= keys) of hs dims, padded to Tp and hsp (multiples of W).
struct Dims {
  int64_t T, hs, Tp, hsp;
  Dims(int64_t T, int64_t hs) : T(T), hs(hs), Tp(round_up(T, W)), hsp(round_up(hs, W)) {}
  bool padded() const { return Tp != T || hsp != hs; }
};

// A slice's rows in memory: row t at data + t * ld.
struct Rows {
  const float* data;
  int64_t ld;
};

// x (T, hs) as (Tp, hsp) with zeros around: x itself when no padding is needed.
Rows pad(Rows x, float* buffer, const Dims& d) {
  if (!d.padded()) return x;
  std::fill(buffer, buffer + d.Tp * d.hsp, 0.0f);
  for (int64_t t = 0; t < d.T; ++t) std::copy(x.data + t * x.ld, x.data + t * x.ld + d.hs, buffer + t * d.hsp);
  return {buffer, d.hsp};
}
// x (T, hs) -> xt (hsp, Tp) with zeros around.
void pad_transposed(Rows x, float* xt, const Dims& d) {
  if (d.padded()) std::fill(xt, xt + d.hsp * d.Tp, 0.0f);
  for (int64_t c = 0; c < d.hs; ++c)  // contiguous stores: GCC gathers the loads
    for (int64_t t = 0; t < d.T; ++t) xt[c * d.Tp + t] = x.data[t * x.ld + c];
}
// A slice's output (T, hs), row t at data + t * ld: stored, or added when `add`.
struct Out {
  float* data;
  int64_t ld;
  bool add;
};
// out = the valid part of xp (Tp, hsp).
void unpad(const float* xp, Out out, const Dims& d) {
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

// Dropout on a slice's weights: weight (i, j) is element base + i * T + j of the
// composition's weight tensor. No mask: no dropout.
struct Drop {
  const kernels::DropoutMask* mask;
  int64_t base;
};

// Per-thread scratch of one slice: floats for five (Tp, hsp) and one (Tp, Tp) buffers,
// and with dropout, one more (Tp, Tp) for the dropped weights.
int64_t scratch_size(const Dims& d, bool dropped) { return 5 * d.Tp * d.hsp + (dropped ? 2 : 1) * d.Tp * d.Tp; }

// Rows [i0, i0 + R) of a causal (Tp, Tp) product need the key tiles up to the one
// holding key i0 + R - 1: columns [0, visible(i0)).
int64_t visible(int64_t i0) { return (i0 / W + 1) * W; }

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

// Rows [i0, i0 + R) of p (rows Tp apart): row i = softmax(row[0, i]), zero from key
// i + 1 on; rows from T on, zero. n (a multiple of W, > i0 + R - 1) bounds the keys'
// vectors: every loop runs over whole vectors, masked keys as -inf (whose exp is 0).
// Stage by stage over the rows, so that the rows' exps overlap in the pipeline: per row
// (and with per-element loops) this ran at a third of the speed.
void softmax_rows(float* p, int64_t i0, int64_t T, int64_t n, int64_t Tp) {
  vec lane;
  for (int64_t l = 0; l < L; ++l) lane[l] = float(l);
  const vec masked = vec{} - std::numeric_limits<float>::infinity();
  const int64_t rows = std::min(R, T - i0);
  float m[R];
  for (int64_t r = 0; r < rows; ++r) {
    float* row = p + r * Tp;
    vec mx = masked;
    for (int64_t j0 = 0; j0 < n; j0 += L) {
      vec x = load(row + j0);
      x = lane + float(j0) <= float(i0 + r) ? x : masked;
      mx = kMax(x, mx);
      store(row + j0, x);
    }
    m[r] = reduce_lanes(mx, kMax);
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* row = p + r * Tp;
    const float mr = m[r];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) row[j] = kernels::fast_exp(row[j] - mr);
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* row = p + r * Tp;
    vec total{};
    for (int64_t j0 = 0; j0 < n; j0 += L) total += load(row + j0);
    const vec inv = vec{} + 1.0f / reduce_lanes(total, kSum);
    for (int64_t j0 = 0; j0 < n; j0 += L) store(row + j0, load(row + j0) * inv);
    std::fill(row + n, row + Tp, 0.0f);
  }
  std::fill(p + std::max<int64_t>(rows, 0) * Tp, p + R * Tp, 0.0f);  // padding rows
}

// Rows [i0, i0 + R) of pd = p with dropout, over their first n (a multiple of W, > i0 +
// R - 1) columns: where the products read them. p (Tp, Tp) is zero from row T on.
void drop_rows(const float* p, float* pd, int64_t i0, int64_t n, const Dims& d, const Drop& drop) {
  const kernels::DropoutMask mask = *drop.mask;  // by value: the loop keeps it in registers
  for (int64_t i = i0; i < i0 + R; ++i) {
    const float* pi = p + i * d.Tp;
    float* pdi = pd + i * d.Tp;
    const int64_t first = drop.base + i * d.T;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) pdi[j] = mask.kept(first + j) ? pi[j] * mask.keep_scale : 0.0f;
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

// One slice forward: p (Tp, Tp) = the causal weights, zero where masked or padded;
// y = pd v, pd = p with dropout (p itself without). The scores are (scale q) k^T, so
// that a masked key is a plain -inf (with scale 0, -inf * scale would be NaN).
void forward_slice(Rows q, Rows k, Rows v, float* p, Out y, float* scratch, const Dims& d, float scale,
                   const Drop& drop) {
  const int64_t Tp = d.Tp, hsp = d.hsp;
  float *kt = scratch, *qs = kt + Tp * hsp, *vbuf = qs + Tp * hsp, *ybuf = vbuf + Tp * hsp;
  float* pd = drop.mask ? scratch + 5 * Tp * hsp : p;  // the first (Tp, Tp) part of the scratch
  pad_transposed(k, kt, d);
  std::fill(qs, qs + Tp * hsp, 0.0f);
  for (int64_t t = 0; t < d.T; ++t)
    for (int64_t c = 0; c < d.hs; ++c) qs[t * hsp + c] = scale * q.data[t * q.ld + c];
  const Rows vp = pad(v, vbuf, d);
  for (int64_t i0 = 0; i0 < Tp; i0 += R) {
    const int64_t n = visible(i0);  // whole vectors: no row has a scalar tail
    tiles(qs + i0 * hsp, hsp, 1, kt, Tp, 0, hsp, p + i0 * Tp, Tp, n);
    softmax_rows(p + i0 * Tp, i0, d.T, n, Tp);
    if (drop.mask) drop_rows(p, pd, i0, n, d, drop);
  }
  into(y, ybuf, d, [&](float* c, int64_t ldc, bool add) {
    for (int64_t i0 = 0; i0 < Tp; i0 += R)
      tiles(pd + i0 * Tp, Tp, 1, vp.data, vp.ld, 0, visible(i0), c + i0 * ldc, ldc, hsp, add);
  });
}

// One slice backward into dq, dk, dv. With dpd = dy v^T, the gradient of pd (= p m,
// m the dropout mask scaled by 1/(1-p), or 1), and D_i = sum_j pd_ij dpd_ij (= dy_i .
// y_i), the softmax's backward is ds = p (m dpd - D) = pd dpd - p D; then
// dq = scale ds k, dk = scale ds^T q, dv = pd^T dy.
void backward_slice(Rows q, Rows k, Rows v, const float* p, Rows dy, Out dq, Out dk, Out dv, float* scratch,
                    const Dims& d, float scale, const Drop& drop) {
  const int64_t Tp = d.Tp, hsp = d.hsp;
  float *vt = scratch, *qbuf = vt + Tp * hsp, *kbuf = qbuf + Tp * hsp, *dybuf = kbuf + Tp * hsp,
        *out = dybuf + Tp * hsp, *ds = out + Tp * hsp;
  const float* pd = p;
  if (drop.mask) {
    float* dropped = ds + Tp * Tp;
    for (int64_t i0 = 0; i0 < Tp; i0 += R) drop_rows(p, dropped, i0, visible(i0), d, drop);
    pd = dropped;
  }
  pad_transposed(v, vt, d);
  const Rows qp = pad(q, qbuf, d), kp = pad(k, kbuf, d), dyp = pad(dy, dybuf, d);
  for (int64_t i0 = 0; i0 < Tp; i0 += R) {
    const int64_t n = visible(i0);
    tiles(dyp.data + i0 * dyp.ld, dyp.ld, 1, vt, Tp, 0, hsp, ds + i0 * Tp, Tp, n);
    for (int64_t i = i0; i < i0 + R; ++i) {  // p is zero past key i: so is ds
      const float *pi = p + i * Tp, *pdi = pd + i * Tp;
      float* dsi = ds + i * Tp;
      vec dot{};
      for (int64_t j0 = 0; j0 < n; j0 += L) dot += load(pdi + j0) * load(dsi + j0);
      const vec D = vec{} + reduce_lanes(dot, kSum);
      if (!drop.mask) {  // pd = p: p (dpd - D), one rounding fewer
        for (int64_t j0 = 0; j0 < n; j0 += L) store(dsi + j0, scale * load(pi + j0) * (load(dsi + j0) - D));
      } else {
        for (int64_t j0 = 0; j0 < n; j0 += L)
          store(dsi + j0, scale * (load(pdi + j0) * load(dsi + j0) - load(pi + j0) * D));
      }
      std::fill(dsi + n, dsi + Tp, 0.0f);
    }
  }
  into(dq, out, d, [&](float* c, int64_t ldc, bool add) {
    for (int64_t i0 = 0; i0 < Tp; i0 += R)
      tiles(ds + i0 * Tp, Tp, 1, kp.data, kp.ld, 0, visible(i0), c + i0 * ldc, ldc, hsp, add);
  });
  // Key j collects from the queries i >= j: columns of ds and pd, read from row j0 down.
  into(dk, out, d, [&](float* c, int64_t ldc, bool add) {
    for (int64_t j0 = 0; j0 < Tp; j0 += R) tiles(ds + j0, 1, Tp, qp.data, qp.ld, j0, Tp, c + j0 * ldc, ldc, hsp, add);
  });
  into(dv, out, d, [&](float* c, int64_t ldc, bool add) {
    for (int64_t j0 = 0; j0 < Tp; j0 += R) tiles(pd + j0, 1, Tp, dyp.data, dyp.ld, j0, Tp, c + j0 * ldc, ldc, hsp, add);
  });
}

// Where the slices live: slice s = (b, h), b < batch, h < heads, reads its q, k and v
// rows at in(s) (plus each one's base) with row stride in_ld, and its output and the
// output's gradient at out(s) with row stride out_ld.
struct Layout {
  int64_t batch, heads, in_batch, in_head, in_ld, out_batch, out_head, out_ld;
  int64_t slices() const { return batch * heads; }
  int64_t in(int64_t s) const { return s / heads * in_batch + s % heads * in_head; }
  int64_t out(int64_t s) const { return s / heads * out_batch + s % heads * out_head; }
};

// Slices run in parallel, each with its own scratch.
template <class Body>
void each_slice(const Layout& L, const Dims& d, bool dropped, bool parallel, Body body) {
#pragma omp parallel if (parallel)
  {
    std::vector<float> scratch(size_t(scratch_size(d, dropped)));
#pragma omp for
    for (int64_t s = 0; s < L.slices(); ++s) body(s, scratch.data());
  }
}

// A call's q, k and v (or their gradients'): slice s's at base + L.in(s).
template <class T>
struct Bases {
  T *q, *k, *v;
};

// What one call of the op is, for its forward and its backward.
struct Call {
  Layout L;
  Dims d;
  float scale;
  std::optional<kernels::DropoutMask> mask;  // none: no dropout
  bool parallel;
  Call(const Layout& L, const Dims& d, float scale, WeightDropout dropout, int64_t numel)
      : L(L), d(d), scale(scale), parallel(numel * d.T >= kParallelGrain) {
    require_softmax_scale("causal_attention", scale);
    require_probability("causal_attention", dropout.p);
    if (dropout.p > 0.0f) mask.emplace(dropout.p, dropout.seed);
  }
  Drop drop(int64_t s) const { return {mask ? &*mask : nullptr, s * d.T * d.T}; }
  float* weights(float* p, int64_t s) const { return p + s * d.Tp * d.Tp; }
};

void forward(Bases<const float> in, float* p, float* y, const Call& c) {
  each_slice(c.L, c.d, c.mask.has_value(), c.parallel, [&](int64_t s, float* scratch) {
    const int64_t i = c.L.in(s), ld = c.L.in_ld;
    forward_slice({in.q + i, ld}, {in.k + i, ld}, {in.v + i, ld}, c.weights(p, s), {y + c.L.out(s), c.L.out_ld, false},
                  scratch, c.d, c.scale, c.drop(s));
  });
}

// The gradients have the inputs' layout; `add`: into gradients that hold some already.
void backward(Bases<const float> in, float* p, const float* dy, Bases<float> g, bool add, const Call& c) {
  each_slice(c.L, c.d, c.mask.has_value(), c.parallel, [&](int64_t s, float* scratch) {
    const int64_t i = c.L.in(s), ld = c.L.in_ld;
    backward_slice({in.q + i, ld}, {in.k + i, ld}, {in.v + i, ld}, c.weights(p, s), {dy + c.L.out(s), c.L.out_ld},
                   {g.q + i, ld, add}, {g.k + i, ld, add}, {g.v + i, ld, add}, scratch, c.d, c.scale, c.drop(s));
  });
}

}  // namespace

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale, WeightDropout dropout) {
  if (q.ndim() < 2 || q.shape().last() == 0 || q.size(-2) == 0)
    fail("causal_attention", "needs non-empty (..., T, hs) inputs, got q ", q.shape());
  if (k.shape() != q.shape() || v.shape() != q.shape())
    fail("causal_attention", "q ", q.shape(), ", k ", k.shape(), " and v ", v.shape(), " must have one shape");
  const Dims d(q.size(-2), q.shape().last());
  const int64_t slice = d.T * d.hs, slices = q.numel() / slice;
  const Call c({slices, 1, slice, 0, d.hs, slice, 0, d.hs}, d, scale, dropout, q.numel());
  Tensor y = Tensor::empty(q.shape());
  Tensor p = Tensor::empty(Shape{slices, d.Tp, d.Tp});  // the weights, padded, for backward
  forward({q.data(), k.data(), v.data()}, p.data(), y.data(), c);
  if (!needs_grad({&q, &k, &v})) return y;
  record(y, "causal_attention", {&q, &k, &v},
         [sq = q.detach(), sk = k.detach(), sv = v.detach(), p, c](const Tensor& grad, const InputGrads& in) {
           // q, k and v may be one tensor: each gradient whole first, then added in turn.
           Tensor dq = Tensor::empty(sq.shape()), dk = Tensor::empty(sq.shape()), dv = Tensor::empty(sq.shape());
           backward({sq.data(), sk.data(), sv.data()}, p.data(), grad.data(), {dq.data(), dk.data(), dv.data()},
                    false, c);
           const Tensor* grads[] = {&dq, &dk, &dv};
           for (size_t i = 0; i < 3; ++i)
             in.write(i, [src = grads[i]->data(), n = sq.numel()](float* gx, bool overwrite) {
               flat_map(gx, overwrite, n, [](float x) { return x; }, src);
             });
         },
         {&q, &k, &v});
  return y;
}

Tensor causal_attention_packed(const Tensor& qkv, int64_t n_head, float scale, WeightDropout dropout) {
  if (qkv.ndim() != 3 || qkv.numel() == 0 || n_head < 1 || qkv.size(2) % (3 * n_head))
    fail("causal_attention", "packed qkv ", qkv.shape(), " must be non-empty (B, T, n_head * 3 * hs) for n_head ",
         n_head);
  const int64_t B = qkv.size(0), T = qkv.size(1), W = qkv.size(2), hs = W / (3 * n_head), C = n_head * hs;
  const Call c({B, n_head, T * W, 3 * hs, W, T * C, hs, C}, Dims(T, hs), scale, dropout, qkv.numel());
  Tensor y = Tensor::empty({B, T, C});
  Tensor p = Tensor::empty(Shape{B * n_head, c.d.Tp, c.d.Tp});  // the weights, padded, for backward
  const float* x = qkv.data();
  forward({x + hs, x, x + 2 * hs}, p.data(), y.data(), c);  // a head's k, q, v
  if (!needs_grad({&qkv})) return y;
  record(y, "causal_attention_packed", {&qkv}, [sx = qkv.detach(), p, c, hs](const Tensor& grad, const InputGrads& in) {
    // The heads' k, q and v tile each row: every element of the gradient is written once.
    in.write(0, [&](float* g, bool overwrite) {
      const float* x = sx.data();
      backward({x + hs, x, x + 2 * hs}, p.data(), grad.data(), {g + hs, g, g + 2 * hs}, !overwrite, c);
    });
  }, {&qkv});
  return y;
}

}  // namespace folio
