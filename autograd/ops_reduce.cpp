// Sums and means, over everything or over one axis.
#include "base/error.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"

namespace folio {
namespace {

int normalize_axis(const char* op, const Tensor& x, int axis) {
  const int a = axis < 0 ? axis + x.ndim() : axis;
  if (a < 0 || a >= x.ndim()) fail(op, "axis ", axis, " out of range for shape ", x.shape());
  return a;
}

// Views x as (outer, n, inner) around `axis`.
struct Around {
  int64_t outer = 1, n = 1, inner = 1;
};
Around around(const Shape& s, int axis) {
  Around r;
  for (int i = 0; i < s.ndim; ++i) (i < axis ? r.outer : i == axis ? r.n : r.inner) *= s.dims[i];
  return r;
}

// sum(x) * factor over everything.
Tensor reduce_all(const char* op, const Tensor& x, float factor) {
  const int64_t n = x.numel();
  const float* p = x.data();
  double acc = 0.0;
#pragma omp parallel for reduction(+ : acc) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) acc += p[i];
  Tensor out = Tensor::scalar(float(acc * factor));
  record(out, op, {&x}, [n, factor](const Tensor& grad, const InputGrads& in) {
    const float g = grad.data()[0] * factor;
    in.write(0, [=](float* gx) {
#pragma omp parallel for simd if (n >= kParallelGrain)
      for (int64_t i = 0; i < n; ++i) gx[i] += g;
    });
  });
  return out;
}

// sum(x, axis) * factor.
Tensor reduce_axis(const char* op, const Tensor& x, int axis, bool keepdim, float factor_or_0) {
  const int a = normalize_axis(op, x, axis);
  const Around r = around(x.shape(), a);
  const float factor = factor_or_0 ? factor_or_0 : 1.0f / float(r.n);
  Shape out_shape = x.shape();
  if (keepdim) {
    out_shape.dims[a] = 1;
  } else {
    for (int i = a; i + 1 < out_shape.ndim; ++i) out_shape.dims[i] = out_shape.dims[i + 1];
    --out_shape.ndim;
  }
  Tensor out = Tensor::zeros(out_shape);
  {
    const float* p = x.data();
    float* o = out.data();
#pragma omp parallel for if (x.numel() >= kParallelGrain)
    for (int64_t i = 0; i < r.outer; ++i)
      for (int64_t k = 0; k < r.n; ++k)
        for (int64_t j = 0; j < r.inner; ++j) o[i * r.inner + j] += p[(i * r.n + k) * r.inner + j];
    for (int64_t i = 0; i < out.numel(); ++i) o[i] *= factor;
  }
  record(out, op, {&x}, [r, factor](const Tensor& grad, const InputGrads& in) {
    const float* g = grad.data();
    in.write(0, [=](float* gx) {
#pragma omp parallel for if (r.outer * r.n * r.inner >= kParallelGrain)
      for (int64_t i = 0; i < r.outer; ++i)
        for (int64_t k = 0; k < r.n; ++k)
          for (int64_t j = 0; j < r.inner; ++j) gx[(i * r.n + k) * r.inner + j] += factor * g[i * r.inner + j];
    });
  });
  return out;
}

}  // namespace

Tensor sum(const Tensor& x) { return reduce_all("sum", x, 1.0f); }
Tensor mean(const Tensor& x) {
  if (x.numel() == 0) fail("mean", "of an empty tensor of shape ", x.shape());
  return reduce_all("mean", x, 1.0f / float(x.numel()));
}
Tensor sum(const Tensor& x, int axis, bool keepdim) { return reduce_axis("sum", x, axis, keepdim, 1.0f); }
Tensor mean(const Tensor& x, int axis, bool keepdim) {
  return reduce_axis("mean", x, axis, keepdim, 0.0f);
}

}  // namespace folio
