// Ops of the attention options (nn/attention.h): RMS normalisation of q and k
// (QK-norm) and rotary position embeddings, alone and fused over MultiHead's packed
// projection. Rows run in parallel; every row is independent, so the result does not
// depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "autograd/kernels/rows.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"

namespace folio {

Tensor rms_norm(const Tensor& x, float eps) {
  if (x.ndim() == 0 || x.shape().last() == 0) fail("rms_norm", "needs a non-empty last dim, got shape ", x.shape());
  if (!(eps > 0.0f && std::isfinite(eps))) fail("rms_norm", "eps must be positive, got ", eps);
  const int64_t C = x.shape().last(), rows = x.shape().rows();
  Tensor out = Tensor::empty(x.shape());
  Tensor rstd = Tensor::empty(Shape{rows});  // 1 / rms per row, for backward
  {
    const float* in = x.data();
    float *o = out.data(), *r = rstd.data();
#pragma omp parallel for if (x.numel() >= kParallelGrain)
    for (int64_t row = 0; row < rows; ++row) {
      r[row] = kernels::rms_norm_row(in + row * C, o + row * C, C, eps);
    }
  }
  if (!needs_grad({&x})) return out;
  // y = x * r, r = (mean(x^2) + eps)^-1/2:  dx = r * (g - y * mean(g * y)).
  record(out, "rms_norm", {&x}, [sx = x.detach(), rstd, rows, C](const Tensor& grad, const InputGrads& in) {
    in.write(0, [&](float* gx) {
      const float *xs = sx.data(), *g = grad.data(), *r = rstd.data();
#pragma omp parallel for if (rows * C >= kParallelGrain)
      for (int64_t row = 0; row < rows; ++row) {
        const float *xr = xs + row * C, *gr = g + row * C;
        const float k = r[row];
        float gy = 0.0f;
#pragma omp simd reduction(+ : gy)
        for (int64_t c = 0; c < C; ++c) gy += gr[c] * xr[c] * k;
        gy /= float(C);
        float* dst = gx + row * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) dst[c] += k * (gr[c] - xr[c] * k * gy);
      }
    });
  }, {&x});
  return out;
}

namespace {

// Rotates the pairs (i, i + h) of rows [0, rows) of `in` into `out` (+= when `add`),
// row t at position start + t % T, by the angle whose cos/sin the tables hold, times
// `dir` (+1 forward, -1 for the backward: the transpose of a rotation is its inverse).
void rotate_rows(const float* in, float* out, bool add, int64_t rows, int64_t T, int64_t h, const float* cos,
                 const float* sin, int64_t start, float dir) {
#pragma omp parallel for if (rows * 2 * h >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float *c = cos + (start + r % T) * h, *s = sin + (start + r % T) * h;
    const float* x = in + r * 2 * h;
    float* y = out + r * 2 * h;
    if (add) {
#pragma omp simd
      for (int64_t i = 0; i < h; ++i) {
        const float sn = dir * s[i];
        y[i] += x[i] * c[i] - x[i + h] * sn;
        y[i + h] += x[i] * sn + x[i + h] * c[i];
      }
    } else {
      kernels::rotate_half_row(x, y, h, c, s, dir);
    }
  }
}

}  // namespace

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t start) {
  if (x.ndim() < 2 || x.shape().last() % 2 || x.shape().last() == 0)
    fail("rope", "needs (..., T, HS) with HS even, got shape ", x.shape());
  const int64_t HS = x.shape().last(), h = HS / 2, T = x.size(x.ndim() - 2), rows = x.shape().rows();
  if (cos.ndim() != 2 || cos.size(1) != h || sin.shape() != cos.shape())
    fail("rope", "tables cos ", cos.shape(), " and sin ", sin.shape(), " must be (P, ", h, ") for input ", x.shape());
  if (start < 0 || start + T > cos.size(0))
    fail("rope", "positions [", start, ", ", start + T, ") outside the tables' ", cos.size(0));
  Tensor out = Tensor::empty(x.shape());
  rotate_rows(x.data(), out.data(), false, rows, T, h, cos.data(), sin.data(), start, 1.0f);
  record(out, "rope", {&x}, [cos, sin, rows, T, h, start](const Tensor& grad, const InputGrads& in) {
    in.write(0, [&](float* gx, bool overwrite) {
      rotate_rows(grad.data(), gx, !overwrite, rows, T, h, cos.data(), sin.data(), start, -1.0f);
    });
  });
  return out;
}

// One pass over the packed projection instead of three head copies, a norm and a
// rotation each for q and k, and the copy back: the attention options then cost what
// reading and writing qkv once costs, and causal_attention_packed still reads it in
// place.
Tensor position_qk_packed(const Tensor& qkv, int64_t n_head, bool qk_norm, const Tensor& cos, const Tensor& sin,
                          float eps) {
  if (qkv.ndim() != 3 || n_head < 1 || qkv.size(2) % (3 * n_head) || qkv.size(2) == 0)
    fail("position_qk_packed", "needs qkv (B, T, n_head * 3 * hs) for n_head ", n_head, ", got shape ", qkv.shape());
  const int64_t T = qkv.size(1), W = qkv.size(2), hs = W / (3 * n_head), h = hs / 2, rows = qkv.size(0) * T;
  const bool rotary = cos.defined();
  if (rotary && (hs % 2 || cos.ndim() != 2 || cos.size(1) != h || sin.shape() != cos.shape() || cos.size(0) < T))
    fail("position_qk_packed", "tables cos ", cos.shape(), " and sin ", sin.shape(), " must be (P >= ", T, ", ", h,
         ") for an even head size; got head size ", hs);
  if (qk_norm && !(eps > 0.0f && std::isfinite(eps))) fail("position_qk_packed", "eps must be positive, got ", eps);
  Tensor out = Tensor::empty(qkv.shape());  // (B, T, n_head * 3 * hs)
  // 1 / rms of every row's heads' key and query, for backward.
  Tensor rstd = Tensor::empty(Shape{qk_norm ? rows * n_head * 2 : 1});  // (B * T * n_head * 2)
  {
    const float* in = qkv.data();
    float *o = out.data(), *r = rstd.data();
#pragma omp parallel for if (qkv.numel() >= kParallelGrain)
    for (int64_t row = 0; row < rows; ++row) {
      const float *c = rotary ? cos.data() + (row % T) * h : nullptr, *s = rotary ? sin.data() + (row % T) * h : nullptr;
      for (int64_t hd = 0; hd < n_head; ++hd) {
        const int64_t at = row * W + hd * 3 * hs;  // this head's key, then query, then value
        for (int64_t part = 0; part < 2; ++part) {
          const float* x = in + at + part * hs;
          float* y = o + at + part * hs;
          if (qk_norm) r[(row * n_head + hd) * 2 + part] = kernels::rms_norm_row(x, y, hs, eps);
          else std::copy(x, x + hs, y);
          if (rotary) kernels::rotate_half_row(y, y, h, c, s, 1.0f);
        }
        std::copy(in + at + 2 * hs, in + at + 3 * hs, o + at + 2 * hs);
      }
    }
  }
  if (!needs_grad({&qkv})) return out;
  // Per key or query row: rotate the gradient back (a rotation's transpose is its
  // inverse), then the RMS norm's backward, dx = r * (g - y * mean(g * y)) with y = x r.
  const Tensor none;
  record(out, "position_qk_packed", {&qkv},
         [sx = qk_norm ? qkv.detach() : Tensor{}, rstd, cos, sin, rows, T, W, hs, h, n_head, qk_norm, rotary](
             const Tensor& grad, const InputGrads& in) {
    in.write(0, [&](float* gx, bool overwrite) {
      const float *g = grad.data(), *r = rstd.data(), *xs = qk_norm ? sx.data() : nullptr;
#pragma omp parallel if (rows * W >= kParallelGrain)
      {
        std::vector<float> scratch(static_cast<size_t>(hs));
        float* gn = scratch.data();  // (hs) one key's or query's gradient, rotated back
#pragma omp for
        for (int64_t row = 0; row < rows; ++row) {
          const float *c = rotary ? cos.data() + (row % T) * h : nullptr,
                      *s = rotary ? sin.data() + (row % T) * h : nullptr;
          for (int64_t hd = 0; hd < n_head; ++hd) {
            const int64_t at = row * W + hd * 3 * hs;
            for (int64_t part = 0; part < 3; ++part) {  // key, query, value
              const float* gr = g + at + part * hs;
              float* dst = gx + at + part * hs;
              std::copy(gr, gr + hs, gn);
              if (part < 2 && rotary) kernels::rotate_half_row(gn, gn, h, c, s, -1.0f);
              if (part < 2 && qk_norm) {
                const float* xr = xs + at + part * hs;
                const float k = r[(row * n_head + hd) * 2 + part];
                float gy = 0.0f;
#pragma omp simd reduction(+ : gy)
                for (int64_t i = 0; i < hs; ++i) gy += gn[i] * xr[i] * k;
                gy /= float(hs);
#pragma omp simd
                for (int64_t i = 0; i < hs; ++i) gn[i] = k * (gn[i] - xr[i] * k * gy);
              }
              if (overwrite) std::copy(gn, gn + hs, dst);
              else
#pragma omp simd
                for (int64_t i = 0; i < hs; ++i) dst[i] += gn[i];
            }
          }
        }
      }
    });
  }, {qk_norm ? &qkv : &none});
  return out;
}

}  // namespace folio
