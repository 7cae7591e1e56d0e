// Softmax family over the last dim, each row independent (rows run in parallel).
#include <cmath>
#include <limits>

#include "base/error.h"
#include "autograd/kernels/rows.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"

namespace folio {
namespace {

using kernels::fast_exp, kernels::row_max, kernels::softmax_row;

// dx[0, n) += scale * y * (dy - <dy, y>): the softmax Jacobian-vector product.
inline void softmax_row_backward(const float* y, const float* dy, float* dx, int64_t n, float scale) {
  float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j < n; ++j) dot += dy[j] * y[j];
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dx[j] += scale * y[j] * (dy[j] - dot);
}

void need_rows(const char* op, const Tensor& x) {
  if (x.ndim() == 0 || x.shape().last() == 0) fail(op, "needs a non-empty last dim, got shape ", x.shape());
}

// An output shaped as x whose rows `row` writes, each from x's (n floats), in parallel.
template <class Row>
Tensor rowwise(const char* op, const Tensor& x, Row row) {
  need_rows(op, x);
  const int64_t rows = x.shape().rows(), n = x.shape().last();
  Tensor out = Tensor::empty(x.shape());
  const float* in = x.data();
  float* o = out.data();
#pragma omp parallel for if (x.numel() >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) row(in + r * n, o + r * n, n);
  return out;
}

// A row's length without its trailing -inf (a causal mask filled in by masked_fill),
// or all of it when it is all -inf (NaN, as torch's): trailing -inf weigh exactly 0,
// and a sum that leaves them out adds in the order causal_softmax's does, so the
// tutorials' masked softmax is that op's numbers bit for bit.
inline int64_t unmasked_length(const float* x, int64_t n) {
  int64_t m = n;
  while (m > 0 && x[m - 1] == -std::numeric_limits<float>::infinity()) --m;
  return m ? m : n;
}

}  // namespace

Tensor softmax(const Tensor& x) {
  Tensor out = rowwise("softmax", x, [](const float* xr, float* yr, int64_t n) {
    softmax_row(xr, yr, unmasked_length(xr, n), n, 1.0f);
  });
  const int64_t rows = x.shape().rows(), n = x.shape().last();
  record(out, "softmax", {&x}, [y = out.detach(), rows, n](const Tensor& grad, const InputGrads& in) {
    const float *py = y.data(), *g = grad.data();
    in.write(0, [=](float* gx) {
#pragma omp parallel for if (rows * n >= kParallelGrain)
      for (int64_t r = 0; r < rows; ++r) softmax_row_backward(py + r * n, g + r * n, gx + r * n, n, 1.0f);
    });
  }, {&out});
  return out;
}

Tensor causal_softmax(const Tensor& scores, float scale) {
  if (scores.ndim() < 2) fail("causal_softmax", "needs (..., Tq, Tk), got shape ", scores.shape());
  const int64_t tq = scores.size(-2), tk = scores.size(-1);
  if (tq > tk) fail("causal_softmax", "more queries than keys in shape ", scores.shape());
  need_rows("causal_softmax", scores);  // no keys: rows() would divide by zero
  require_softmax_scale("causal_softmax", scale);
  const int64_t rows = scores.shape().rows(), shift = tk - tq;
  Tensor out = Tensor::empty(scores.shape());
  const float* in = scores.data();
  float* o = out.data();
  // Row r is query i = r % tq; it sees keys j <= i + shift (the rest is -inf: zero weight).
#pragma omp parallel for if (scores.numel() >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) softmax_row(in + r * tk, o + r * tk, r % tq + shift + 1, tk, scale);
  record(out, "causal_softmax", {&scores},
         [y = out.detach(), rows, tq, tk, shift, scale](const Tensor& grad, const InputGrads& in) {
           const float *py = y.data(), *g = grad.data();
           in.write(0, [=](float* gx) {
#pragma omp parallel for if (rows * tk >= kParallelGrain)
             for (int64_t r = 0; r < rows; ++r)
               softmax_row_backward(py + r * tk, g + r * tk, gx + r * tk, r % tq + shift + 1, scale);
           });
         }, {&out});
  return out;
}

Tensor log_softmax(const Tensor& x) {
  Tensor out = rowwise("log_softmax", x, [](const float* xr, float* yr, int64_t n) {
    const float mx = row_max(xr, n);
    float total = 0.0f;
#pragma omp simd reduction(+ : total)
    for (int64_t j = 0; j < n; ++j) total += fast_exp(xr[j] - mx);
    const float lse = mx + std::log(total);
    for (int64_t j = 0; j < n; ++j) yr[j] = xr[j] - lse;
  });
  const int64_t rows = x.shape().rows(), n = x.shape().last();
  // dx = dy - softmax(x) * sum(dy), with softmax(x) = exp(y).
  record(out, "log_softmax", {&x}, [y = out.detach(), rows, n](const Tensor& grad, const InputGrads& in) {
    const float *py = y.data(), *g = grad.data();
    in.write(0, [=](float* gx) {
#pragma omp parallel for if (rows * n >= kParallelGrain)
      for (int64_t r = 0; r < rows; ++r) {
        float total = 0.0f;
        for (int64_t j = 0; j < n; ++j) total += g[r * n + j];
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) gx[r * n + j] += g[r * n + j] - fast_exp(py[r * n + j]) * total;
      }
    });
  }, {&out});
  return out;
}

Tensor cross_entropy(const Tensor& logits, std::span<const int32_t> targets) {
  need_rows("cross_entropy", logits);
  const int64_t rows = logits.shape().rows(), V = logits.shape().last();
  if (int64_t(targets.size()) != rows)
    fail("cross_entropy", "logits ", logits.shape(), " have ", rows, " rows but ", targets.size(), " targets");
  int64_t counted = 0;  // rows with a target
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] == kNoTarget) continue;
    if (targets[r] < 0 || targets[r] >= V)
      fail("cross_entropy", "target ", targets[r], " at row ", r, " outside [0, ", V, ") (", kNoTarget, ": none)");
    ++counted;
  }
  // Keep the probabilities for backward: dlogits = (p - onehot) / counted.
  Tensor probs = Tensor::empty(logits.shape());
  const float* in = logits.data();
  float* p = probs.data();
  double loss = 0.0;
#pragma omp parallel for reduction(+ : loss) if (logits.numel() >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] == kNoTarget) continue;
    softmax_row(in + r * V, p + r * V, V, V, 1.0f);
    loss -= std::log(std::max(p[r * V + targets[r]], std::numeric_limits<float>::min()));
  }
  Tensor out = Tensor::scalar(counted ? float(loss / double(counted)) : 0.0f);
  std::vector<int32_t> t(targets.begin(), targets.end());
  record(out, "cross_entropy", {&logits}, [probs, t = std::move(t), rows, V, counted](const Tensor& grad,
                                                                                    const InputGrads& in) {
    const float g = counted ? grad.data()[0] / float(counted) : 0.0f;  // still written: zeros for no target
    const float* p = probs.data();
    in.write(0, [&t, g, p, rows, V](float* gx) {
#pragma omp parallel for if (rows * V >= kParallelGrain)
      for (int64_t r = 0; r < rows; ++r) {
        if (t[r] == kNoTarget) continue;
#pragma omp simd
        for (int64_t j = 0; j < V; ++j) gx[r * V + j] += g * p[r * V + j];
        gx[r * V + t[r]] -= g;
      }
    });
  });
  return out;
}

}  // namespace folio
