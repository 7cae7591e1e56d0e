// The ops layers are made of: embedding lookup, layer norm, dropout.
#include <cmath>
#include <cstring>
#include <vector>

#include "autograd/error.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"

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
  record(out, "embedding", {weight}, [weight, saved = std::move(saved), C](const Tensor& grad) {
    float* gw = weight.grad_data();
    const float* g = grad.data();
    for (size_t i = 0; i < saved.size(); ++i) {  // rows may repeat: scatter-add in order
      float* row = gw + int64_t(saved[i]) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) row[c] += g[i * C + c];
    }
  });
  return out;
}

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
      const float* xr = in + r * C;
      float m = 0.0f;
      for (int64_t c = 0; c < C; ++c) m += xr[c];
      m /= float(C);
      float v = 0.0f;
      for (int64_t c = 0; c < C; ++c) v += (xr[c] - m) * (xr[c] - m);
      const float rstd = 1.0f / std::sqrt(v / float(C) + eps);
      for (int64_t c = 0; c < C; ++c) o[r * C + c] = (xr[c] - m) * rstd * w[c] + b[c];
      st[2 * r] = m;
      st[2 * r + 1] = rstd;
    }
  }
  record(out, "layer_norm", {x, weight, bias}, [x, weight, bias, stats, rows, C](const Tensor& grad) {
    const float *in = x.data(), *w = weight.data(), *g = grad.data(), *st = stats.data();
    float* gx = x.requires_grad() ? x.grad_data() : nullptr;
    float* gw = weight.requires_grad() ? weight.grad_data() : nullptr;
    float* gb = bias.requires_grad() ? bias.grad_data() : nullptr;
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = in + r * C, *gr = g + r * C;
      const float m = st[2 * r], rstd = st[2 * r + 1];
      // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * w
      float mean_d = 0.0f, mean_dx = 0.0f;
      for (int64_t c = 0; c < C; ++c) {
        const float xhat = (xr[c] - m) * rstd, d = gr[c] * w[c];
        mean_d += d;
        mean_dx += d * xhat;
        if (gw) gw[c] += gr[c] * xhat;
        if (gb) gb[c] += gr[c];
      }
      mean_d /= float(C);
      mean_dx /= float(C);
      if (gx)
        for (int64_t c = 0; c < C; ++c) {
          const float xhat = (xr[c] - m) * rstd;
          gx[r * C + c] += rstd * (gr[c] * w[c] - mean_d - xhat * mean_dx);
        }
    }
  });
  return out;
}

namespace {
// A counter-based hash (splitmix64's finaliser): element i's draw depends only on
// (seed, i), so the mask is the same whatever the thread count.
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

Tensor dropout(const Tensor& x, float p, bool training, Rng& rng) {
  if (!(p >= 0.0f && p < 1.0f)) fail("dropout", "probability ", p, " outside [0, 1)");
  if (!training || p == 0.0f) return x;
  const uint64_t seed = rng.next_u64();
  const uint32_t threshold = uint32_t(double(p) * 4294967296.0);  // drop when draw < threshold
  const float keep_scale = 1.0f / (1.0f - p);
  const int64_t n = x.numel();
  Tensor mask = Tensor::empty(x.shape());  // 0 or 1/(1-p)
  Tensor out = Tensor::empty(x.shape());
  const float* in = x.data();
  float *m = mask.data(), *o = out.data();
#pragma omp parallel for simd if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t draw = uint32_t(mix(seed + uint64_t(i) * 0x9e3779b97f4a7c15ULL) >> 32);
    m[i] = draw < threshold ? 0.0f : keep_scale;
    o[i] = in[i] * m[i];
  }
  record(out, "dropout", {x}, [x, mask](const Tensor& grad) {
    const int64_t n = x.numel();
    const float *g = grad.data(), *m = mask.data();
    float* gx = x.grad_data();
#pragma omp parallel for simd if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) gx[i] += g[i] * m[i];
  });
  return out;
}

}  // namespace folio
