#include "train/save_check.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "base/error.h"
#include "base/number_text.h"

namespace folio {
namespace {

// "" or "<what> became <value>" for the first value of `values` that is not finite.
std::string non_finite_in(std::span<const float> values, const std::string& what) {
  const auto bad = std::find_if(values.begin(), values.end(), [](float x) { return !std::isfinite(x); });
  return bad == values.end() ? "" : cat(what, " became ", number_text(*bad));
}

}  // namespace

std::string unsound_evaluation(float train_loss, float val_loss, int64_t vocab_size, const nn::GPT& model,
                               const TrainState& state) {
  // A diverged evaluation is not logged: its NaN would end every plot of the log.
  if (!std::isfinite(train_loss) || !std::isfinite(val_loss))
    return cat("the evaluation loss became ", number_text(std::isfinite(train_loss) ? val_loss : train_loss));
  const float worst = std::max(train_loss, val_loss), bound = 2 * std::log(float(vocab_size));
  if (state.config.on_divergence != OnDivergence::off && worst > bound)
    return cat("the evaluation loss ", worst, " is above twice a uniform guess's (2 ln ", vocab_size, " = ", bound,
               ")");
  const Tensor& w = model.flat_parameters();  // (P,)
  std::string why = non_finite_in({w.data(), size_t(w.numel())}, "a weight");
  for (const NamedTensor& t : state.optimizer.tensors)  // each (N,), flat
    if (why.empty()) why = non_finite_in({t.tensor.data(), size_t(t.tensor.numel())}, cat("the optimizer's ", t.name));
  if (why.empty()) why = non_finite_in(state.ema_weights, "the average of the weights");
  return why;
}

}  // namespace folio
