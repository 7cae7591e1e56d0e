// The ops layers are made of: embedding lookup, layer norm, RMSNorm with its weight, dropout,
// dropped rows.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "autograd/kernels/dropout_mask.h"
#include "autograd/kernels/rows.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/pool.h"

namespace folio {

Tensor embedding(const Tensor& weight, std::span<const int32_t> ids, const Shape& ids_shape) {
  if (weight.ndim() != 2) fail("embedding", "weight must be (V, C), got shape ", weight.shape());
  if (int64_t(ids.size()) != ids_shape.numel())
    fail("embedding", ids.size(), " ids for an index shape ", ids_shape);
  if (ids_shape.ndim >= Shape::kMaxDims) fail("embedding", "index shape ", ids_shape, " has too many dims");
  const int64_t V = weight.size(0), C = weight.size(1), n = int64_t(ids.size());
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= V) fail("embedding", "index ", ids[i], " at position ", i, " outside [0, ", V, ")");
  Shape out_shape = ids_shape;
  out_shape.dims[out_shape.ndim++] = C;
  Tensor out = Tensor::empty(out_shape);
  const float* w = weight.data();
  float* o = out.data();
  for (int64_t i = 0; i < n; ++i) std::memcpy(o + i * C, w + int64_t(ids[i]) * C, sizeof(float) * C);
  std::vector<int32_t> saved(ids.begin(), ids.end());
  record(out, "embedding", {&weight}, [saved = std::move(saved), C](const Tensor& grad, const InputGrads& in) {
    in.write(0, [&](float* gw) {
      const float* g = grad.data();
      for (size_t i = 0; i < saved.size(); ++i) {  // rows may repeat: scatter-add in order
        float* row = gw + int64_t(saved[i]) * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) row[c] += g[i * C + c];
      }
    });
  });
  return out;
}

namespace {

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * w;
// dw += sum over rows of g * xhat, db += sum of g. Rows run in parallel in fixed
// blocks whose partial dw/db are added in block order: the same result every run.
// The row pass adds dx into gx (unless null) and fills the blocks' partials. A plain
// function, not a lambda: behind captured references GCC vectorises it far worse.
void layer_norm_rows(const float* x, const float* w, const float* stats, const float* g, int64_t rows, int64_t C,
                     int64_t blocks, float* partial, float* gx) {
#pragma omp parallel for if (rows * C >= kParallelGrain)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    float *pw = partial + 2 * blk * C, *pb = pw + C;
    for (int64_t r = rows * blk / blocks; r < rows * (blk + 1) / blocks; ++r) {
      const float *xr = x + r * C, *gr = g + r * C;
      const float m = stats[2 * r], rstd = stats[2 * r + 1];
      float mean_d = 0.0f, mean_dx = 0.0f;
#pragma omp simd reduction(+ : mean_d, mean_dx)
      for (int64_t c = 0; c < C; ++c) {
        const float xhat = (xr[c] - m) * rstd, d = gr[c] * w[c];
        mean_d += d;
        mean_dx += d * xhat;
        pw[c] += gr[c] * xhat;
        pb[c] += gr[c];
      }
      mean_d /= float(C);
      mean_dx /= float(C);
      if (gx) {
        float* gxr = gx + r * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) gxr[c] += rstd * (gr[c] * w[c] - mean_d - (xr[c] - m) * rstd * mean_dx);
      }
    }
  }
}

void layer_norm_backward(const float* x, const float* w, const float* stats, const float* g, int64_t rows,
                         int64_t C, const InputGrads& in) {
  const int64_t blocks = std::min<int64_t>(rows, 2 * int64_t(num_threads()));
  float* partial = pool::acquire(size_t(2 * blocks * C));
  std::fill_n(partial, 2 * blocks * C, 0.0f);
  // The row pass runs without dx too, when only the weight and bias need gradients.
  if (!in.write(0, [&](float* gx) { layer_norm_rows(x, w, stats, g, rows, C, blocks, partial, gx); }))
    layer_norm_rows(x, w, stats, g, rows, C, blocks, partial, nullptr);
  for (int64_t half : {0, 1})  // dw (input 1), then db (input 2), summed in block order
    in.write(size_t(1 + half), [&](float* grad) {
      for (int64_t blk = 0; blk < blocks; ++blk)
        for (int64_t c = 0; c < C; ++c) grad[c] += partial[(2 * blk + half) * C + c];
    });
  pool::release(partial, size_t(2 * blocks * C));
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  if (x.ndim() == 0) fail("layer_norm", "needs (..., C), got a scalar");
  const int64_t C = x.shape().last(), rows = x.shape().rows();
  if (weight.shape() != Shape{C} || bias.shape() != Shape{C})
    fail("layer_norm", "weight ", weight.shape(), " and bias ", bias.shape(), " must be (", C,
         ") for input ", x.shape());
  Tensor out = Tensor::empty(x.shape());
  Tensor stats = Tensor::empty(Shape{rows, 2});  // (mean, 1/std) per row, for backward
  {
    const float *in = x.data(), *w = weight.data(), *b = bias.data();
    float *o = out.data(), *st = stats.data();
#pragma omp parallel for if (x.numel() >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const auto [m, rstd] = kernels::layer_norm_row(in + r * C, w, b, o + r * C, C, eps);
      st[2 * r] = m;
      st[2 * r + 1] = rstd;
    }
  }
  if (!needs_grad({&x, &weight, &bias})) return out;
  record(out, "layer_norm", {&x, &weight, &bias},
         [sx = x.detach(), sw = weight.detach(), stats, rows, C](const Tensor& grad, const InputGrads& in) {
           layer_norm_backward(sx.data(), sw.data(), stats.data(), grad.data(), rows, C, in);
         }, {&x, &weight});
  return out;
}

namespace {

// y = xhat * w, xhat = x * k, k = rstd of the row: dx = k (d - xhat mean(d xhat)),
// d = g * w; dw = sum over rows of g * xhat, in fixed blocks of rows whose partials are
// added in block order (as layer_norm_rows). The row pass stores (`store`) or adds dx
// into gx unless gx is null, and fills the blocks' partials.
void rms_norm_rows(const float* x, const float* w, const float* rstd, const float* g, int64_t rows, int64_t C,
                   int64_t blocks, float* partial, float* gx, bool store) {
#pragma omp parallel for if (rows * C >= kParallelGrain)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    float* pw = partial + blk * C;  // (C)
    for (int64_t r = rows * blk / blocks; r < rows * (blk + 1) / blocks; ++r) {
      const float *xr = x + r * C, *gr = g + r * C;
      const float k = rstd[r];
      float mean_dx = 0.0f;
#pragma omp simd reduction(+ : mean_dx)
      for (int64_t c = 0; c < C; ++c) {
        const float xhat = xr[c] * k;
        mean_dx += gr[c] * w[c] * xhat;
        pw[c] += gr[c] * xhat;
      }
      mean_dx /= float(C);
      if (!gx) continue;
      float* gxr = gx + r * C;
      if (store) {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) gxr[c] = k * (gr[c] * w[c] - xr[c] * k * mean_dx);
      } else {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) gxr[c] += k * (gr[c] * w[c] - xr[c] * k * mean_dx);
      }
    }
  }
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) {
  if (x.ndim() == 0 || x.shape().last() == 0) fail("rms_norm", "needs a non-empty last dim, got shape ", x.shape());
  if (!(eps > 0.0f && std::isfinite(eps))) fail("rms_norm", "eps must be positive, got ", eps);
  const int64_t C = x.shape().last(), rows = x.shape().rows();
  if (weight.shape() != Shape{C}) fail("rms_norm", "weight ", weight.shape(), " must be (", C, ") for input ", x.shape());
  Tensor out = Tensor::empty(x.shape());    // (..., C)
  Tensor rstd = Tensor::empty(Shape{rows});  // (rows) 1 / rms per row, for backward
  {
    const float *in = x.data(), *w = weight.data();
    float *o = out.data(), *r = rstd.data();
#pragma omp parallel for if (x.numel() >= kParallelGrain)
    for (int64_t row = 0; row < rows; ++row) {
      float* y = o + row * C;
      r[row] = kernels::rms_norm_row(in + row * C, y, C, eps);  // x k, then times w: as the decoder's norm_row
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) y[c] *= w[c];
    }
  }
  if (!needs_grad({&x, &weight})) return out;
  record(out, "rms_norm", {&x, &weight},
         [sx = x.detach(), sw = weight.detach(), rstd, rows, C](const Tensor& grad, const InputGrads& in) {
           const int64_t blocks = std::min<int64_t>(rows, 2 * int64_t(num_threads()));
           float* partial = pool::acquire(size_t(blocks * C));  // (blocks, C) dw per block
           std::fill_n(partial, blocks * C, 0.0f);
           const float *xs = sx.data(), *ws = sw.data(), *r = rstd.data(), *g = grad.data();
           if (!in.write(0, [&](float* gx, bool store) { rms_norm_rows(xs, ws, r, g, rows, C, blocks, partial, gx, store); }))
             rms_norm_rows(xs, ws, r, g, rows, C, blocks, partial, nullptr, false);
           in.write(1, [&](float* gw) {
             for (int64_t blk = 0; blk < blocks; ++blk)
               for (int64_t c = 0; c < C; ++c) gw[c] += partial[blk * C + c];
           });
           pool::release(partial, size_t(blocks * C));
         }, {&x, &weight});
  return out;
}

// gx += g * mask * keep_scale. Its own function: GCC vectorises the loop ~1.4x
// worse when it reads the mask's parameters from a lambda's captures.
static void dropout_backward(float* gx, const float* g, int64_t n, kernels::DropoutMask mask) {
#pragma omp parallel for simd if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) gx[i] += mask.kept(i) ? g[i] * mask.keep_scale : 0.0f;
}

Tensor dropout(const Tensor& x, float p, bool training, Rng& rng) {
  require_probability("dropout", p);
  if (!training || p == 0.0f) return x;
  const kernels::DropoutMask mask(p, rng.next_u64());
  const int64_t n = x.numel();
  Tensor out = Tensor::empty(x.shape());
  const float* in = x.data();
  float* o = out.data();
#pragma omp parallel for simd if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) o[i] = mask.kept(i) ? in[i] * mask.keep_scale : 0.0f;
  record(out, "dropout", {&x}, [mask, n](const Tensor& grad, const InputGrads& in) {
    in.write(0, [&](float* gx) { dropout_backward(gx, grad.data(), n, mask); });
  });
  return out;
}

// dst[b] = f[b] src[b] (stored) or dst[b] += f[b] src[b], row by row: f is 0 or 1/(1-p).
static void scale_rows(float* dst, bool store, const float* src, const std::vector<float>& factor, int64_t row) {
  for (size_t b = 0; b < factor.size(); ++b) {
    const float f = factor[b];
    flat_map(dst + int64_t(b) * row, store, row, [f](float v) { return f * v; }, src + int64_t(b) * row);
  }
}

Tensor drop_rows(const Tensor& x, float p, bool training, Rng& rng) {
  require_probability("drop_rows", p);
  if (!training || p == 0.0f) return x;
  if (x.ndim() < 1 || x.numel() == 0) fail("drop_rows", "needs rows to drop, got shape ", x.shape());
  const kernels::DropoutMask mask(p, rng.next_u64());
  const int64_t rows = x.size(0), row = x.numel() / rows;
  std::vector<float> factor(size_t(rows), 0.0f);  // (B) what each row is multiplied by
  for (int64_t b = 0; b < rows; ++b)
    if (mask.kept(b)) factor[size_t(b)] = mask.keep_scale;
  Tensor out = Tensor::empty(x.shape());
  scale_rows(out.data(), true, x.data(), factor, row);
  record(out, "drop_rows", {&x}, [factor, row](const Tensor& grad, const InputGrads& in) {
    in.write(0, [&](float* gx, bool overwrite) { scale_rows(gx, overwrite, grad.data(), factor, row); });
  });
  return out;
}

}  // namespace folio
