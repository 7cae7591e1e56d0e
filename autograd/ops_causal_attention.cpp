// Causal self-attention in one op: y = causal_softmax(q k^T, scale) v, computed per
// (T, hs) slice without the masked half. The composition (matmul, causal_softmax,
// matmul) multiplies the full T x T square and masks half of it away afterwards, six
// times per layer counting the backward; here every product runs over the keys j <= i
// only (in tiles of 16 keys), and the scores never leave the slice. Measured on one
// core (bench_ops Attention vs CausalAttention, forward + backward): 1.2x the
// composition at config S (T 64, hs 32), 1.3x at M (T 256, hs 64).
//
// Slices run in parallel; each slice's sums run in a fixed order, so the result does
// not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/error.h"
#include "autograd/kernels/rows.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"

namespace folio {
namespace {

// A register of 16 floats (GCC/Clang vector extension: one zmm with AVX-512, two ymm
// with AVX2); slices are padded to multiples of it, so no loop has a scalar tail.
using vec = float __attribute__((vector_size(64)));
constexpr int64_t W = 16, R = 8;  // tile: R rows by W columns

inline vec load(const float* p) {
  vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, vec v) { std::memcpy(p, &v, sizeof v); }
int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// c[r * ldc + (0, W)] = sum_{k0 <= k < k1} a[r * ars + k * aks] * b[k * ldb + (0, W)], r < R:
// the one product of the op, with a read along rows (q, p, ds) or down columns (p^T, ds^T).
// R = 8 accumulators keep both FMA pipes busy through their 4-cycle latency.
void tile(const float* a, int64_t ars, int64_t aks, const float* b, int64_t ldb, int64_t k0, int64_t k1, float* c,
          int64_t ldc) {
  vec acc[R] = {};
  for (int64_t k = k0; k < k1; ++k) {
    const vec bk = load(b + k * ldb);
    const float* ak = a + k * aks;
#pragma GCC unroll 8
    for (int64_t r = 0; r < R; ++r) acc[r] += ak[r * ars] * bk;
  }
#pragma GCC unroll 8
  for (int64_t r = 0; r < R; ++r) store(c + r * ldc, acc[r]);
}

// A slice's sizes: T queries (= keys) of hs dims, padded to Tp and hsp (multiples of W).
struct Dims {
  int64_t T, hs, Tp, hsp;
  Dims(int64_t T, int64_t hs) : T(T), hs(hs), Tp(round_up(T, W)), hsp(round_up(hs, W)) {}
  bool padded() const { return Tp != T || hsp != hs; }
};

// x (T, hs) as (Tp, hsp) with zeros around: x itself when no padding is needed.
const float* pad(const float* x, float* buffer, const Dims& d) {
  if (!d.padded()) return x;
  std::fill(buffer, buffer + d.Tp * d.hsp, 0.0f);
  for (int64_t t = 0; t < d.T; ++t) std::copy(x + t * d.hs, x + (t + 1) * d.hs, buffer + t * d.hsp);
  return buffer;
}
// x (T, hs) -> xt (hsp, Tp) with zeros around.
void pad_transposed(const float* x, float* xt, const Dims& d) {
  if (d.padded()) std::fill(xt, xt + d.hsp * d.Tp, 0.0f);
  for (int64_t c = 0; c < d.hs; ++c)  // contiguous stores: GCC gathers the loads
    for (int64_t t = 0; t < d.T; ++t) xt[c * d.Tp + t] = x[t * d.hs + c];
}
// out (T, hs) = the valid part of xp (Tp, hsp).
void unpad(const float* xp, float* out, const Dims& d) {
  for (int64_t t = 0; t < d.T; ++t) std::copy(xp + t * d.hsp, xp + t * d.hsp + d.hs, out + t * d.hs);
}

// Per-thread scratch of one slice: floats for four (Tp, hsp) and one (Tp, Tp) buffers.
int64_t scratch_size(const Dims& d) { return 5 * d.Tp * d.hsp + d.Tp * d.Tp; }

// Rows [i0, i0 + R) of a causal (Tp, Tp) product need the key tiles up to the one
// holding key i0 + R - 1: columns [0, visible(i0)).
int64_t visible(int64_t i0) { return (i0 / W + 1) * W; }

// The largest of x's lanes, by halves (a loop over the lanes would be W dependent steps).
float max_lane(vec x) {
  using v8 = float __attribute__((vector_size(32)));
  using v4 = float __attribute__((vector_size(16)));
  v8 a, b;
  std::memcpy(&a, &x, sizeof a);
  std::memcpy(&b, reinterpret_cast<const char*>(&x) + sizeof a, sizeof b);
  a = a > b ? a : b;
  v4 c, e;
  std::memcpy(&c, &a, sizeof c);
  std::memcpy(&e, reinterpret_cast<const char*>(&a) + sizeof c, sizeof e);
  c = c > e ? c : e;
  return std::max(std::max(c[0], c[1]), std::max(c[2], c[3]));
}

// row[0, Tp) = softmax(row[0, i]), zero from key i + 1 on; n (a multiple of W, > i)
// bounds the keys' vectors, so that no loop has a scalar tail.
void softmax_visible(float* row, int64_t i, int64_t n, int64_t Tp) {
  std::fill(row + i + 1, row + n, -std::numeric_limits<float>::infinity());
  vec mx = load(row);
  for (int64_t j0 = W; j0 < n; j0 += W) {
    const vec x = load(row + j0);
    mx = x > mx ? x : mx;
  }
  kernels::softmax_row(row, row, n, Tp, 1.0f, max_lane(mx));
}

// One slice forward: p (Tp, Tp) = the causal weights, zero where masked or padded;
// y (T, hs) = p v. The scores are (scale q) k^T, so that a masked key is a plain -inf
// (with scale 0, -inf * scale would be NaN).
void forward_slice(const float* q, const float* k, const float* v, float* p, float* y, float* scratch,
                   const Dims& d, float scale) {
  const int64_t Tp = d.Tp, hsp = d.hsp;
  float *kt = scratch, *qs = kt + Tp * hsp, *vbuf = qs + Tp * hsp, *ybuf = vbuf + Tp * hsp;
  pad_transposed(k, kt, d);
  std::fill(qs, qs + Tp * hsp, 0.0f);
  for (int64_t t = 0; t < d.T; ++t)
    for (int64_t c = 0; c < d.hs; ++c) qs[t * hsp + c] = scale * q[t * d.hs + c];
  const float* vp = pad(v, vbuf, d);
  float* yp = d.padded() ? ybuf : y;
  for (int64_t i0 = 0; i0 < Tp; i0 += R) {
    const int64_t n = visible(i0);  // whole vectors: no row has a scalar tail
    for (int64_t j0 = 0; j0 < n; j0 += W) tile(qs + i0 * hsp, hsp, 1, kt + j0, Tp, 0, hsp, p + i0 * Tp + j0, Tp);
    for (int64_t i = i0; i < i0 + R; ++i) {
      float* pi = p + i * Tp;
      if (i >= d.T) {
        std::fill(pi, pi + Tp, 0.0f);
        continue;
      }
      softmax_visible(pi, i, n, Tp);
    }
    for (int64_t c0 = 0; c0 < hsp; c0 += W) tile(p + i0 * Tp, Tp, 1, vp + c0, hsp, 0, n, yp + i0 * hsp + c0, hsp);
  }
  if (d.padded()) unpad(yp, y, d);
}

// One slice backward: dq, dk, dv (T, hs). With dp = dy v^T and D_i = sum_j p_ij dp_ij
// (= dy_i . y_i), the softmax's backward is ds = p (dp - D); then dq = scale ds k,
// dk = scale ds^T q, dv = p^T dy.
void backward_slice(const float* q, const float* k, const float* v, const float* p, const float* dy, float* dq,
                    float* dk, float* dv, float* scratch, const Dims& d, float scale) {
  const int64_t Tp = d.Tp, hsp = d.hsp;
  float *vt = scratch, *qbuf = vt + Tp * hsp, *kbuf = qbuf + Tp * hsp, *dybuf = kbuf + Tp * hsp,
        *out = dybuf + Tp * hsp, *ds = out + Tp * hsp;
  pad_transposed(v, vt, d);
  const float *qp = pad(q, qbuf, d), *kp = pad(k, kbuf, d), *dyp = pad(dy, dybuf, d);
  for (int64_t i0 = 0; i0 < Tp; i0 += R) {
    const int64_t n = visible(i0);
    for (int64_t j0 = 0; j0 < n; j0 += W) tile(dyp + i0 * hsp, hsp, 1, vt + j0, Tp, 0, hsp, ds + i0 * Tp + j0, Tp);
    for (int64_t i = i0; i < i0 + R; ++i) {  // p is zero past key i: so is ds
      const float* pi = p + i * Tp;
      float* dsi = ds + i * Tp;
      float D = 0.0f;
#pragma omp simd reduction(+ : D)
      for (int64_t j = 0; j < n; ++j) D += pi[j] * dsi[j];
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) dsi[j] = scale * pi[j] * (dsi[j] - D);
      std::fill(dsi + n, dsi + Tp, 0.0f);
    }
  }
  float* outp = d.padded() ? out : dq;
  for (int64_t i0 = 0; i0 < Tp; i0 += R)
    for (int64_t c0 = 0; c0 < hsp; c0 += W)
      tile(ds + i0 * Tp, Tp, 1, kp + c0, hsp, 0, visible(i0), outp + i0 * hsp + c0, hsp);
  if (d.padded()) unpad(out, dq, d);
  // Key j collects from the queries i >= j: columns of ds and p, read from row j0 down.
  outp = d.padded() ? out : dk;
  for (int64_t j0 = 0; j0 < Tp; j0 += R)
    for (int64_t c0 = 0; c0 < hsp; c0 += W) tile(ds + j0, 1, Tp, qp + c0, hsp, j0, Tp, outp + j0 * hsp + c0, hsp);
  if (d.padded()) unpad(out, dk, d);
  outp = d.padded() ? out : dv;
  for (int64_t j0 = 0; j0 < Tp; j0 += R)
    for (int64_t c0 = 0; c0 < hsp; c0 += W) tile(p + j0, 1, Tp, dyp + c0, hsp, j0, Tp, outp + j0 * hsp + c0, hsp);
  if (d.padded()) unpad(out, dv, d);
}

// g (+)= src over n floats: an input's gradient from a buffer computed whole.
void store_or_add(float* g, bool overwrite, const float* src, int64_t n) {
  if (overwrite) {
    std::memcpy(g, src, sizeof(float) * size_t(n));
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) g[i] += src[i];
}

}  // namespace

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale) {
  if (q.ndim() < 2 || q.shape().last() == 0 || q.size(-2) == 0)
    fail("causal_attention", "needs non-empty (..., T, hs) inputs, got q ", q.shape());
  if (k.shape() != q.shape() || v.shape() != q.shape())
    fail("causal_attention", "q ", q.shape(), ", k ", k.shape(), " and v ", v.shape(), " must have one shape");
  if (!(scale >= 0.0f && std::isfinite(scale)))
    fail("causal_attention", "scale ", scale, " must be finite and >= 0");
  const Dims d(q.size(-2), q.shape().last());
  const int64_t T = d.T, hs = d.hs, Tp = d.Tp, slices = q.numel() / (T * hs);
  Tensor y = Tensor::empty(q.shape());
  Tensor p = Tensor::empty(Shape{slices, Tp, Tp});  // the weights, padded, for backward
  const bool parallel = q.numel() * T >= kParallelGrain;
  {
    const float *pq = q.data(), *pk = k.data(), *pv = v.data();
    float *pp = p.data(), *py = y.data();
#pragma omp parallel if (parallel)
    {
      std::vector<float> scratch(size_t(scratch_size(d)));
#pragma omp for
      for (int64_t s = 0; s < slices; ++s) {
        const int64_t o = s * T * hs;
        forward_slice(pq + o, pk + o, pv + o, pp + s * Tp * Tp, py + o, scratch.data(), d, scale);
      }
    }
  }
  if (!needs_grad({&q, &k, &v})) return y;
  record(y, "causal_attention", {&q, &k, &v},
         [sq = q.detach(), sk = k.detach(), sv = v.detach(), p, d, slices, scale, parallel](const Tensor& grad,
                                                                                         const InputGrads& in) {
           const int64_t T = d.T, hs = d.hs, Tp = d.Tp, n = slices * T * hs;
           Tensor dq = Tensor::empty(sq.shape()), dk = Tensor::empty(sq.shape()), dv = Tensor::empty(sq.shape());
           const float *pq = sq.data(), *pk = sk.data(), *pv = sv.data(), *pp = p.data(), *g = grad.data();
           float *gq = dq.data(), *gk = dk.data(), *gv = dv.data();
#pragma omp parallel if (parallel)
           {
             std::vector<float> scratch(size_t(scratch_size(d)));
#pragma omp for
             for (int64_t s = 0; s < slices; ++s) {
               const int64_t o = s * T * hs;
               backward_slice(pq + o, pk + o, pv + o, pp + s * Tp * Tp, g + o, gq + o, gk + o, gv + o, scratch.data(),
                              d, scale);
             }
           }
           const float* grads[] = {gq, gk, gv};
           for (size_t i = 0; i < 3; ++i)
             in.write(i, [src = grads[i], n](float* gx, bool overwrite) { store_or_add(gx, overwrite, src, n); });
         },
         {&q, &k, &v});
  return y;
}

}  // namespace folio
