#include "train/config.h"

#include <cmath>
#include <utility>

#include "base/error.h"
#include "base/parse_name.h"

namespace folio {

const char* to_string(OptimizerKind k) { return k == OptimizerKind::muon ? "muon" : "adamw"; }

std::optional<OptimizerKind> parse_optimizer(std::string_view name) {
  return parse_name(name, {OptimizerKind::adamw, OptimizerKind::muon});
}

const char* to_string(Decay d) { return d == Decay::wsd ? "wsd" : "cosine"; }

std::optional<Decay> parse_decay(std::string_view name) { return parse_name(name, {Decay::cosine, Decay::wsd}); }

void TrainConfig::validate() const {
  require_positive("config", {{"batch_size", batch_size}, {"grad_accum", grad_accum}, {"eval_interval", eval_interval},
                              {"eval_iters", eval_iters}, {"log_interval", log_interval}});
  if (max_iters < 0) fail("config", "max_iters must be >= 0 (0: no step limit), got ", max_iters);
  if (!(max_time >= 0.0 && max_time <= kMaxTime))
    fail("config", "max_time ", max_time, " outside [0, ", kMaxTime, "] seconds (0: no limit)");
  if (max_iters == 0 && max_time == 0.0)
    fail("config", "max_iters 0 (no step limit) needs a time budget: max_time > 0");
  if (lr_decay_iters < 0) fail("config", "lr_decay_iters must be >= 0 (0: max_iters), got ", lr_decay_iters);
  if (warmup_iters < 0) fail("config", "warmup_iters must be >= 0, got ", warmup_iters);
  if (muon_momentum_warmup < 0) fail("config", "muon_momentum_warmup must be >= 0, got ", muon_momentum_warmup);
  if (seq_warmup < 0) fail("config", "seq_warmup must be >= 0, got ", seq_warmup);
  if (seq_warmup > 0 && sampling == Sampling::epoch)
    fail("config", "seq_warmup ", seq_warmup, " needs sampling random (epoch cuts the text into windows of one length)");
  if (batch_warmup < 0) fail("config", "batch_warmup must be >= 0, got ", batch_warmup);
  if (threads < 0 || threads > kMaxThreads) fail("config", "threads ", threads, " outside [0, ", kMaxThreads, "]");
  if (batch_size > kMaxBatch) fail("config", "batch_size ", batch_size, " exceeds the limit of ", kMaxBatch);
  if (grad_accum > kMaxBatch) fail("config", "grad_accum ", grad_accum, " exceeds the limit of ", kMaxBatch);
  for (auto [name, v] : {std::pair{"max_iters", max_iters}, std::pair{"warmup_iters", warmup_iters},
                         std::pair{"muon_momentum_warmup", muon_momentum_warmup}, std::pair{"seq_warmup", seq_warmup},
                         std::pair{"batch_warmup", batch_warmup},
                         std::pair{"lr_decay_iters", lr_decay_iters}, std::pair{"eval_interval", eval_interval},
                         std::pair{"eval_iters", eval_iters}, std::pair{"log_interval", log_interval}})
    if (v > kMaxIters) fail("config", name, " ", v, " exceeds the limit of ", kMaxIters);
  if (!(train_fraction > 0.0 && train_fraction < 1.0))
    fail("config", "train_fraction ", train_fraction, " outside (0, 1)");
  if (!(lr > 0.0f && std::isfinite(lr))) fail("config", "lr must be positive, got ", lr);
  if (!(min_lr >= 0.0f && min_lr <= lr)) fail("config", "min_lr ", min_lr, " outside [0, lr = ", lr, "]");
  if (!(weight_decay >= 0.0f && std::isfinite(weight_decay))) fail("config", "weight_decay must be >= 0, got ", weight_decay);
  if (!(beta2 > 0.0f && beta2 < 1.0f)) fail("config", "beta2 ", beta2, " outside (0, 1)");
  if (!(grad_clip >= 0.0f && std::isfinite(grad_clip))) fail("config", "grad_clip must be >= 0 (0: off), got ", grad_clip);
  if (!(muon_lr > 0.0f && std::isfinite(muon_lr))) fail("config", "muon_lr must be positive, got ", muon_lr);
  if (!(muon_weight_decay >= 0.0f && std::isfinite(muon_weight_decay)))
    fail("config", "muon_weight_decay must be >= 0, got ", muon_weight_decay);
  if (!(cooldown > 0.0f && cooldown <= 1.0f)) fail("config", "cooldown ", cooldown, " outside (0, 1]");
  if (!(ema >= 0.0f && ema < 1.0f)) fail("config", "ema ", ema, " outside [0, 1) (0: off)");
}

}  // namespace folio
