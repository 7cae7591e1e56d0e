#include "train/adamw.h"

#include <cmath>

#include "autograd/error.h"
#include "autograd/parallel.h"

namespace folio {

AdamW::AdamW(const nn::NamedParameters& params, AdamWConfig config) : config_(config) {
  int64_t total = 0;
  for (const auto& [name, p] : params) {
    segments_.push_back({p, total, p.ndim() >= 2});
    total += p.numel();
  }
  m_.assign(total, 0.0f);
  v_.assign(total, 0.0f);
}

void AdamW::step(float lr) {
  ++t_;
  const float b1 = config_.beta1, b2 = config_.beta2, eps = config_.eps;
  const float correction1 = 1.0f - std::pow(b1, float(t_));
  const float correction2 = 1.0f - std::pow(b2, float(t_));
  const float step_size = lr / correction1;
  const float inv_sqrt_c2 = 1.0f / std::sqrt(correction2);
  for (const Segment& s : segments_) {
    if (!s.param.has_grad()) continue;  // untouched by this step's loss
    const int64_t n = s.param.numel();
    float* p = s.param.data();
    const float* g = s.param.grad_data();
    float *m = m_.data() + s.offset, *v = v_.data() + s.offset;
    const float decay = s.decay ? 1.0f - lr * config_.weight_decay : 1.0f;
#pragma omp parallel for simd if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + (1.0f - b1) * g[i];
      v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
      p[i] = p[i] * decay - step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_c2 + eps);
    }
  }
}

float clip_grad_norm(const std::vector<Tensor>& params, float max_norm) {
  double total = 0.0;
  for (const Tensor& p : params) {
    if (!p.has_grad()) continue;
    const float* g = p.grad_data();
    double s = 0.0;
    for (int64_t i = 0; i < p.numel(); ++i) s += double(g[i]) * g[i];
    total += s;
  }
  const float norm = float(std::sqrt(total));
  if (max_norm > 0.0f && norm > max_norm) {
    const float k = max_norm / (norm + 1e-6f);
    for (const Tensor& p : params) {
      if (!p.has_grad()) continue;
      float* g = p.grad_data();
      for (int64_t i = 0; i < p.numel(); ++i) g[i] *= k;
    }
  }
  return norm;
}

float Schedule::at(int64_t step) const {
  if (step < warmup_iters) return lr * float(step + 1) / float(warmup_iters + 1);
  if (step >= decay_iters) return min_lr;
  const double ratio = double(step - warmup_iters) / double(std::max<int64_t>(1, decay_iters - warmup_iters));
  const double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));
  return float(min_lr + coeff * (lr - min_lr));
}

}  // namespace folio
