#include "train/optimizer.h"

namespace folio {

Optimizer::Optimizer(const nn::NamedParameters& params, const TrainConfig& c)
    : peak_lr_(c.lr), muon_lr_(c.muon_lr) {
  const AdamWConfig adam{.beta1 = 0.9f, .beta2 = c.beta2, .eps = 1e-8f, .weight_decay = c.weight_decay};
  if (c.optimizer == OptimizerKind::adamw) {
    adamw_ = std::make_unique<AdamW>(params, adam);
    return;
  }
  MuonSplit split = split_for_muon(params);
  adamw_ = std::make_unique<AdamW>(split.rest, adam);
  muon_ = std::make_unique<Muon>(std::move(split.matrices), muon_config(c));
}

MuonConfig muon_config(const TrainConfig& c) {
  return {.momentum_warmup = c.muon_momentum_warmup, .weight_decay = c.muon_weight_decay};
}

void Optimizer::step(float lr, int64_t step) {
  adamw_->step(lr);
  if (muon_) muon_->step(muon_lr_ * (lr / peak_lr_), step);
}

}  // namespace folio
