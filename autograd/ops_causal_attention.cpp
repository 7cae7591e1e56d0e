// Causal self-attention in one op: y = dropout(causal_softmax(q k^T, scale)) v, computed per
// (T, hs) slice without the masked half. The composition (matmul, causal_softmax,
// matmul) multiplies the full T x T square and masks half of it away afterwards, six
// times per layer counting the backward; here every product runs over the keys j <= i
// only (in tiles of 16 keys), and the scores never leave the slice. Measured on one
// core, forward + backward (bench/README.md, "bf16"): 1.37x the composition at config
// S (T 64, hs 32), 1.6x at M (T 256, hs 64); the packed form also saves the per-head
// copies around it. Dropout on the weights (nanoGPT's attn_dropout) happens inside:
// the mask is regenerated from its seed in the backward, so no (T, T) tensor besides
// the weights themselves is kept, and the dropped weights are the composition's. The
// bf16 form keeps not even the weights: two numbers a row, from which its backward
// recomputes them (at GPT-2 small's shape, 604 MB less a sequence).
//
// Slices run in parallel; each slice's sums run in a fixed order, so the result does
// not depend on the thread count. In bf16 the slices are attention_slice_bf16.cpp's;
// the pieces both forms share are in attention_slice.h.
#include <atomic>
#include <optional>
#include <vector>

#include "base/error.h"
#include "autograd/attention_slice.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"

namespace folio {
namespace {

using namespace attention_slice;  // Dims, Rows, Out, Drop, the softmax and the tiles

std::atomic<int64_t> calls[2];  // forward calls, fp32 and bf16, all threads

// Per-thread scratch of one fp32 slice: the backward's seven buffers of Tp rows by hsp
// (one of them a (hsp, ld) transpose) and two blocks of R rows of ld (ds's, and pd's with
// dropout); the forward's four such buffers and one block fit in them. Kept as
// Bf16Scratch is.
struct Fp32Scratch {
  std::vector<float> f;
  void reserve(const Dims& d, bool) { grow_to(f, 7 * d.ld * d.hsp + 2 * R * d.ld); }
};

// x (T, hs) as (Tp, hsp) with zeros around: x itself when no padding is needed.
Rows pad(Rows x, float* buffer, const Dims& d) {
  if (!d.padded()) return x;
  std::fill(buffer, buffer + d.Tp * d.hsp, 0.0f);
  for (int64_t t = 0; t < d.T; ++t) std::copy(x.data + t * x.ld, x.data + t * x.ld + d.hs, buffer + t * d.hsp);
  return {buffer, d.hsp};
}
// x (T, hs) -> xt (hsp, Tp), rows ld apart, with zeros around (columns from Tp on are
// not read).
void pad_transposed(Rows x, float* xt, const Dims& d) {
  if (d.padded()) std::fill(xt, xt + d.hsp * d.ld, 0.0f);
  for (int64_t c = 0; c < d.hs; ++c)  // contiguous stores: GCC gathers the loads
    for (int64_t t = 0; t < d.T; ++t) xt[c * d.ld + t] = x.data[t * x.ld + c];
}

// One slice forward, a block of R rows at a time: p (Tp, ld) = the causal weights, kept
// for the backward (row i written over its first visible(i) columns, the ones the
// backward reads); y = pd v, pd = p with dropout (p itself without). The scores are
// (scale q) k^T, so that a masked key is a plain -inf (with scale 0, -inf * scale would
// be NaN). The bf16 form keeps only the softmax's statistics and recomputes the weights
// in its backward; here that measured 10-20 % slower (one product more of six, in fp32).
void forward_slice(Rows q, Rows k, Rows v, float* p, Out y, Fp32Scratch& s, const Dims& d, float scale,
                   const Drop& drop) {
  const int64_t Tp = d.Tp, hsp = d.hsp, ld = d.ld;
  float* kt = s.f.data();         // (hsp, ld) k^T
  float* qs = kt + ld * hsp;      // (Tp, hsp) scale q
  float* vbuf = qs + ld * hsp;    // (Tp, hsp) v, when padded
  float* ybuf = vbuf + ld * hsp;  // (Tp, hsp) y, when padded
  float* dropped = ybuf + ld * hsp;  // (R, ld) a block of pd, with dropout
  pad_transposed(k, kt, d);
  std::fill(qs, qs + Tp * hsp, 0.0f);
  for (int64_t t = 0; t < d.T; ++t)
    for (int64_t c = 0; c < d.hs; ++c) qs[t * hsp + c] = scale * q.data[t * q.ld + c];
  const Rows vp = pad(v, vbuf, d);
  into(y, ybuf, d, [&](float* c, int64_t ldc, bool add) {
    for (int64_t i0 = 0; i0 < Tp; i0 += R) {
      const int64_t n = visible(i0);  // whole vectors: no row has a scalar tail
      float* pi = p + i0 * ld;        // (R, ld)
      tiles(qs + i0 * hsp, hsp, 1, kt, ld, 0, hsp, pi, ld, n);
      softmax_rows(pi, i0, d.T, n, ld);
      const float* pd = pi;
      if (drop.mask) drop_rows(pi, dropped, i0, n, ld, d, drop), pd = dropped;
      tiles(pd, ld, 1, vp.data, vp.ld, 0, n, c + i0 * ldc, ldc, hsp, add);
    }
  });
}

// One slice backward into dq, dk, dv, a block of R query rows at a time, as the forward
// ran. With dpd = dy v^T, the gradient of pd (= p m, m the dropout mask scaled by
// 1/(1-p), or 1), the softmax's backward gives the block's rows of ds
// (softmax_backward_rows); then its rows of dq = ds k, and its terms of dk = ds^T q and
// dv = pd^T dy, added in the queries' order to sums that start at zero: the sums one
// pass down ds's and pd's columns would take, bit for bit. Down the columns, every query
// read a new line of a (Tp, Tp) matrix (at Tp 1024 a new page), once for each vector of
// hs: the backward took 5 times the forward's time; a block's rows are still in cache.
void backward_slice(Rows q, Rows k, Rows v, const float* p, Rows dy, Out dq, Out dk, Out dv, Fp32Scratch& s,
                    const Dims& d, float scale, const Drop& drop) {
  const int64_t Tp = d.Tp, hsp = d.hsp, ld = d.ld;
  float* vt = s.f.data();          // (hsp, ld) v^T
  float* qbuf = vt + ld * hsp;     // (Tp, hsp) q, when padded
  float* kbuf = qbuf + ld * hsp;   // (Tp, hsp) k, when padded
  float* dybuf = kbuf + ld * hsp;  // (Tp, hsp) dy, when padded
  float* dqbuf = dybuf + ld * hsp;  // (Tp, hsp) dq, when padded
  float* dksum = dqbuf + ld * hsp;  // (Tp, hsp) dk's sums
  float* dvsum = dksum + ld * hsp;  // (Tp, hsp) dv's sums
  float* ds = dvsum + ld * hsp;     // (R, ld) a block of dpd, then of ds
  float* dropped = ds + R * ld;     // (R, ld) a block of pd, with dropout
  pad_transposed(v, vt, d);
  const Rows qp = pad(q, qbuf, d), kp = pad(k, kbuf, d), dyp = pad(dy, dybuf, d);
  std::fill(dksum, dksum + Tp * hsp, 0.0f);
  std::fill(dvsum, dvsum + Tp * hsp, 0.0f);
  into(dq, dqbuf, d, [&](float* c, int64_t ldc, bool add) {
    for (int64_t i0 = 0; i0 < Tp; i0 += R) {
      const int64_t n = visible(i0);  // keys [0, n): the block's columns the forward wrote
      const float* pi = p + i0 * ld;  // (R, ld)
      const float* pd = pi;
      if (drop.mask) drop_rows(pi, dropped, i0, n, ld, d, drop), pd = dropped;
      tiles(dyp.data + i0 * dyp.ld, dyp.ld, 1, vt, ld, 0, hsp, ds, ld, n);
      softmax_backward_rows(pi, pd, ds, n, ld, scale, drop.mask != nullptr);
      tiles(ds, ld, 1, kp.data, kp.ld, 0, n, c + i0 * ldc, ldc, hsp, add);
      // Keys j < n collect from this block's queries: a column of the block each.
      for (int64_t j0 = 0; j0 < n; j0 += R) {
        tiles_resumed(ds + j0, 1, ld, qp.data + i0 * qp.ld, qp.ld, 0, R, dksum + j0 * hsp, hsp, hsp);
        tiles_resumed(pd + j0, 1, ld, dyp.data + i0 * dyp.ld, dyp.ld, 0, R, dvsum + j0 * hsp, hsp, hsp);
      }
    }
  });
  unpad(dksum, dk, d);
  unpad(dvsum, dv, d);
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
  Precision precision;
  Call(const Layout& L, const Dims& d, float scale, WeightDropout dropout, int64_t numel, Precision precision)
      : L(L), d(d), scale(scale), parallel(numel * d.T >= kParallelGrain), precision(precision) {
    require_softmax_scale("causal_attention", scale);
    require_probability("causal_attention", dropout.p);
    if (dropout.p > 0.0f) mask.emplace(dropout.p, dropout.seed);
  }
  Drop drop(int64_t s) const { return {mask ? &*mask : nullptr, s * d.T * d.T}; }
  // What the forward keeps for the backward, per slice: the weights (Tp, ld) in fp32,
  // the softmax's statistics (2, Tp) in bf16.
  int64_t kept_per_slice() const { return precision == Precision::bf16 ? 2 * d.Tp : d.Tp * d.ld; }
  float* kept(float* all, int64_t s) const { return all + s * kept_per_slice(); }
};

// This thread's scratch of one kind, shared by the forward and the backward; every
// buffer in it is written before it is read.
template <class Scratch>
Scratch& thread_scratch() {
  static thread_local Scratch scratch;
  return scratch;
}

// Slices run in parallel, each thread with its own scratch: body(s, scratch) for every
// slice s. The scratch's type picks the slice functions body calls.
template <class Scratch, class Body>
void each_slice_with(const Call& c, Body body) {
#pragma omp parallel if (c.parallel)
  {
    Scratch& scratch = thread_scratch<Scratch>();
    scratch.reserve(c.d, c.mask.has_value());
#pragma omp for
    for (int64_t s = 0; s < c.L.slices(); ++s) body(s, scratch);
  }
}

// each_slice_with the scratch of the call's precision.
template <class Body>
void each_slice(const Call& c, Body body) {
  if (c.precision == Precision::bf16) return each_slice_with<Bf16Scratch>(c, body);
  each_slice_with<Fp32Scratch>(c, body);
}

// The slice functions of each precision, with what their forward keeps.
void forward_slice(Rows q, Rows k, Rows v, float* kept, Out y, Bf16Scratch& s, const Dims& d, float scale,
                   const Drop& drop) {
  attention_slice::forward_slice(q, k, v, RowStats::in(kept, d), y, s, d, scale, drop);
}
void backward_slice(Rows q, Rows k, Rows v, float* kept, Rows dy, Out dq, Out dk, Out dv, Bf16Scratch& s,
                    const Dims& d, float scale, const Drop& drop) {
  attention_slice::backward_slice(q, k, v, RowStats::in(kept, d), dy, dq, dk, dv, s, d, scale, drop);
}

void forward(Bases<const float> in, float* kept, float* y, const Call& c) {
  calls[c.precision == Precision::bf16].fetch_add(1, std::memory_order_relaxed);
  each_slice(c, [&](int64_t s, auto& scratch) {
    const int64_t i = c.L.in(s), ld = c.L.in_ld;
    forward_slice({in.q + i, ld}, {in.k + i, ld}, {in.v + i, ld}, c.kept(kept, s), {y + c.L.out(s), c.L.out_ld, false},
                  scratch, c.d, c.scale, c.drop(s));
  });
}

// The gradients have the inputs' layout; `add`: into gradients that hold some already.
void backward(Bases<const float> in, float* kept, const float* dy, Bases<float> g, bool add, const Call& c) {
  each_slice(c, [&](int64_t s, auto& scratch) {
    const int64_t i = c.L.in(s), ld = c.L.in_ld;
    backward_slice({in.q + i, ld}, {in.k + i, ld}, {in.v + i, ld}, c.kept(kept, s), {dy + c.L.out(s), c.L.out_ld},
                   {g.q + i, ld, add}, {g.k + i, ld, add}, {g.v + i, ld, add}, scratch, c.d, c.scale, c.drop(s));
  });
}

}  // namespace

AttentionCalls causal_attention_calls() {
  return {calls[0].load(std::memory_order_relaxed), calls[1].load(std::memory_order_relaxed)};
}

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale, WeightDropout dropout,
                        Precision precision) {
  if (q.ndim() < 2 || q.shape().last() == 0 || q.size(-2) == 0)
    fail("causal_attention", "needs non-empty (..., T, hs) inputs, got q ", q.shape());
  if (k.shape() != q.shape() || v.shape() != q.shape())
    fail("causal_attention", "q ", q.shape(), ", k ", k.shape(), " and v ", v.shape(), " must have one shape");
  const Dims d(q.size(-2), q.shape().last());
  const int64_t slice = d.T * d.hs, slices = q.numel() / slice;
  const Call c({slices, 1, slice, 0, d.hs, slice, 0, d.hs}, d, scale, dropout, q.numel(), precision);
  Tensor y = Tensor::empty(q.shape());
  Tensor kept = Tensor::empty(Shape{slices, c.kept_per_slice()});  // (slices, Tp ld) fp32, (slices, 2 Tp) bf16
  forward({q.data(), k.data(), v.data()}, kept.data(), y.data(), c);
  if (!needs_grad({&q, &k, &v})) return y;
  record(y, "causal_attention", {&q, &k, &v},
         [sq = q.detach(), sk = k.detach(), sv = v.detach(), kept, c](const Tensor& grad, const InputGrads& in) {
           // q, k and v may be one tensor: each gradient whole first, then added in turn.
           Tensor dq = Tensor::empty(sq.shape()), dk = Tensor::empty(sq.shape()), dv = Tensor::empty(sq.shape());
           backward({sq.data(), sk.data(), sv.data()}, kept.data(), grad.data(), {dq.data(), dk.data(), dv.data()},
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

Tensor causal_attention_packed(const Tensor& qkv, int64_t n_head, float scale, WeightDropout dropout,
                               Precision precision) {
  if (qkv.ndim() != 3 || qkv.numel() == 0 || n_head < 1 || qkv.size(2) % (3 * n_head))
    fail("causal_attention", "packed qkv ", qkv.shape(), " must be non-empty (B, T, n_head * 3 * hs) for n_head ",
         n_head);
  const int64_t B = qkv.size(0), T = qkv.size(1), W = qkv.size(2), hs = W / (3 * n_head), C = n_head * hs;
  const Call c({B, n_head, T * W, 3 * hs, W, T * C, hs, C}, Dims(T, hs), scale, dropout, qkv.numel(), precision);
  Tensor y = Tensor::empty({B, T, C});
  Tensor kept = Tensor::empty(Shape{B * n_head, c.kept_per_slice()});  // (B nh, Tp ld) fp32, (B nh, 2 Tp) bf16
  const float* x = qkv.data();
  forward({x + hs, x, x + 2 * hs}, kept.data(), y.data(), c);  // a head's k, q, v
  if (!needs_grad({&qkv})) return y;
  record(y, "causal_attention_packed", {&qkv}, [sx = qkv.detach(), kept, c, hs](const Tensor& grad, const InputGrads& in) {
    // The heads' k, q and v tile each row: every element of the gradient is written once.
    in.write(0, [&](float* g, bool overwrite) {
      const float* x = sx.data();
      backward({x + hs, x, x + 2 * hs}, kept.data(), grad.data(), {g + hs, g, g + 2 * hs}, !overwrite, c);
    });
  }, {&qkv});
  return y;
}

}  // namespace folio
