#include "train/adamw.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "autograd/parallel.h"

namespace folio {

AdamW::AdamW(const nn::NamedParameters& params, AdamWConfig config) : config_(config) {
  int64_t total = 0;
  for (const auto& [name, p] : params) {
    params_.push_back(p);
    const bool decay = p.ndim() >= 2;  // matrices and embeddings; not biases or norms
    float *data = p.data(), *grad = p.grad_data();
    Segment* last = segments_.empty() ? nullptr : &segments_.back();
    if (last && last->decay == decay && last->data + last->numel == data && last->grad + last->numel == grad)
      last->numel += p.numel();
    else
      segments_.push_back({data, grad, p.numel(), total, decay});
    total += p.numel();
  }
  m_ = Tensor::zeros({total});
  v_ = Tensor::zeros({total});
}

void AdamW::save_state(OptimizerState& into) const {
  into.tensors.push_back({"adamw.m", m_});  // shared, not copied (Optimizer::shared_state)
  into.tensors.push_back({"adamw.v", v_});
  into.counters.push_back({"adamw_steps", std::to_string(t_)});
}

void AdamW::check_state(const OptimizerState& s, const std::string& where) {
  checked_counter(s, "adamw_steps", where);
  const Tensor& m = checked_tensor(s, "adamw.m", where);
  const Tensor& v = checked_tensor(s, "adamw.v", where, /*non_negative=*/true);  // second moments are squares
  if (m.numel() != v.numel()) fail("checkpoint", where, ": tensors adamw.m and adamw.v differ in size");
}

void AdamW::load_state(const OptimizerState& s, const std::string& where) {
  check_state(s, where);
  const Tensor &m = *s.find("adamw.m"), &v = *s.find("adamw.v");
  if (m.numel() != size())
    fail("checkpoint", where, ": tensor adamw.m has ", m.numel(), " values but the model has ", size(),
         " parameters for AdamW");
  std::copy_n(m.data(), m.numel(), m_.data());
  std::copy_n(v.data(), v.numel(), v_.data());
  t_ = checked_counter(s, "adamw_steps", where);
}

void AdamW::step(float lr) {
  ++t_;
  const float b1 = config_.beta1, b2 = config_.beta2, eps = config_.eps;
  const float correction1 = 1.0f - std::pow(b1, float(t_));
  const float correction2 = 1.0f - std::pow(b2, float(t_));
  const float step_size = lr / correction1;
  const float inv_sqrt_c2 = 1.0f / std::sqrt(correction2);
  // One parallel region for all segments: each thread takes its share of every one,
  // with no barrier between them (a region per segment paid a fork and a join 13 times
  // for config S's 0.8M parameters). Elementwise, so the result is the same.
#pragma omp parallel if (m_.numel() >= kParallelGrain)
  for (const Segment& s : segments_) {
    const int64_t n = s.numel;
    float* p = s.data;
    const float* g = s.grad;
    float *m = m_.data() + s.offset, *v = v_.data() + s.offset;
    const float decay = s.decay ? 1.0f - lr * config_.weight_decay : 1.0f;
#pragma omp for simd schedule(static) nowait
    for (int64_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + (1.0f - b1) * g[i];
      v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
      p[i] = p[i] * decay - step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_c2 + eps);
    }
  }
  // A graph recorded before this step saved the old weights: its backward must fail.
  for (const Tensor& p : params_) p.mark_modified();
}

float clip_grad_norm(const std::vector<Tensor>& params, float max_norm) {
  const std::vector<nn::GradRun> runs = nn::grad_runs(params);
  double total = 0.0;
  for (const nn::GradRun& r : runs) {
    const float* g = r.grad;
    double s = 0.0;
#pragma omp parallel for simd reduction(+ : s) if (r.numel >= kParallelGrain)
    for (int64_t i = 0; i < r.numel; ++i) s += double(g[i]) * g[i];
    total += s;
  }
  const float norm = float(std::sqrt(total));
  if (max_norm > 0.0f && norm > max_norm) {
    const float k = max_norm / (norm + 1e-6f);
    for (const nn::GradRun& r : runs) {
      float* g = r.grad;
#pragma omp parallel for simd if (r.numel >= kParallelGrain)
      for (int64_t i = 0; i < r.numel; ++i) g[i] *= k;
    }
  }
  return norm;
}

float Schedule::at(int64_t step, double seconds) const {
  if (step < warmup_iters) return lr * float(step + 1) / float(warmup_iters + 1);
  const bool timed = decay_seconds > 0;
  if (timed ? seconds >= decay_seconds : step >= decay_iters) return min_lr;
  const double ratio = timed ? std::max(0.0, seconds / decay_seconds)
                             : double(step - warmup_iters) / double(std::max<int64_t>(1, decay_iters - warmup_iters));
  const double coeff = decay == Decay::wsd ? std::min(1.0, (1.0 - ratio) / cooldown)  // 1, then down to 0
                                           : 0.5 * (1.0 + std::cos(M_PI * ratio));
  return float(min_lr + coeff * (lr - min_lr));
}

Schedule schedule_of(const TrainConfig& tc) {
  return {tc.lr, tc.min_lr, tc.warmup_iters, tc.lr_decay_iters ? tc.lr_decay_iters : tc.max_iters,
          tc.schedule_follows_time() ? tc.max_time : 0.0, tc.decay, double(tc.cooldown)};
}

}  // namespace folio
