#include "train/divergence_guard.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/number_text.h"

namespace folio {

DivergenceGuard::DivergenceGuard(const TrainConfig& config, GuardState state)
    : threshold_(config.spike_threshold),
      grad_threshold_(config.grad_spike_threshold),
      window_(config.spike_window),
      off_(config.on_divergence == OnDivergence::off),
      state_(std::move(state)) {
  // A resume with a shorter --spike-window keeps the newest steps.
  for (std::vector<float>* w : {&state_.losses, &state_.norms})
    if (int64_t(w->size()) > window_) w->erase(w->begin(), w->end() - window_);
}

bool DivergenceGuard::begin(int64_t step) {
  if (step <= state_.furthest_step) return false;
  state_.furthest_step = step;
  return true;
}

double DivergenceGuard::z_score(const std::vector<float>& window, float x) const {
  if (int64_t(window.size()) < std::min(window_, kMinWindow)) return 0;
  double sum = 0, sum_sq = 0;
  for (float v : window) sum += v, sum_sq += double(v) * v;
  const double n = double(window.size()), mean = sum / n, var = sum_sq / n - mean * mean;
  return var > 0 ? (double(x) - mean) / std::sqrt(var) : 0;
}

std::string DivergenceGuard::verdict(float loss, float grad_norm) const {
  if (!std::isfinite(loss)) return cat("the loss became ", number_text(loss));
  if (!std::isfinite(grad_norm)) return cat("the gradient norm became ", number_text(grad_norm));
  if (off_) return "";
  auto spike = [&](const char* what, const std::vector<float>& window, float x, float threshold) -> std::string {
    const double z = threshold > 0 ? z_score(window, x) : 0.0;
    if (!(z > threshold)) return "";
    double mean = 0;
    for (float v : window) mean += v;
    return cat("the ", what, " ", x, " is a spike: ", std::round(z * 10) / 10, " standard deviations above the mean ",
               float(mean / double(window.size())), " of the last ", window.size(),
               " steps (--", &window == &state_.losses ? "spike-threshold " : "grad-spike-threshold ", threshold, ")");
  };
  if (std::string why = spike("loss", state_.losses, loss, threshold_); !why.empty()) return why;
  return spike("gradient norm", state_.norms, grad_norm, grad_threshold_);
}

void DivergenceGuard::accepted(float loss, float grad_norm, bool clipped) {
  state_.skipped_in_a_row = 0;
  norm_sum_ += grad_norm, ++steps_, clipped_ += clipped;
  if (off_) return;  // no window to keep
  for (auto [w, x] : {std::pair{&state_.losses, loss}, std::pair{&state_.norms, grad_norm}}) {
    if (int64_t(w->size()) == window_) w->erase(w->begin());  // W floats: nothing next to a step
    w->push_back(x);
  }
}

bool DivergenceGuard::skip() {
  ++state_.skipped;
  return ++state_.skipped_in_a_row <= kMaxSkipsInARow;
}

void DivergenceGuard::rolled_back(const GuardState& target, float factor) {
  state_.losses = target.losses, state_.norms = target.norms;
  state_.skipped_in_a_row = 0;
  ++state_.rollbacks;
  state_.lr_scale *= factor;
  norm_sum_ = 0, steps_ = 0, clipped_ = 0;  // the rows up to the checkpoint are written
}

float DivergenceGuard::mean_loss() const {
  double sum = 0;
  for (float v : state_.losses) sum += v;
  return state_.losses.empty() ? 0.0f : float(sum / double(state_.losses.size()));
}

Health DivergenceGuard::take_health() {
  Health h;
  if (steps_ > 0) h.grad_norm = norm_sum_ / double(steps_), h.clipped = double(clipped_) / double(steps_);
  h.skipped = state_.skipped, h.rollbacks = state_.rollbacks;
  norm_sum_ = 0, steps_ = 0, clipped_ = 0;
  return h;
}

std::string first_non_finite(const nn::NamedParameters& params) {
  for (const auto& [name, p] : params)
    for (int64_t i = 0; p.has_grad() && i < p.numel(); ++i)
      if (!std::isfinite(p.grad_data()[i])) return name;
  return "";
}

}  // namespace folio
