#include "train/optimizer.h"

#include "base/error.h"

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

OptimizerState Optimizer::shared_state() const {
  OptimizerState s;
  adamw_->save_state(s);
  if (muon_) muon_->save_state(s);
  return s;
}

OptimizerState Optimizer::state() const { return shared_state().snapshot(); }

void Optimizer::check_state(OptimizerKind kind, const OptimizerState& s, const std::string& where) {
  const bool muon = kind == OptimizerKind::muon;
  AdamW::check_state(s, where);
  if (muon) Muon::check_state(s, where);
  for (const auto& t : s.tensors)
    if (!AdamW::owns(t.name) && !(muon && Muon::owns(t.name)))
      fail("checkpoint", where, ": tensor ", t.name, " is not part of the state of ", to_string(kind));
}

void Optimizer::load_state(const OptimizerState& s, const std::string& where) {
  check_state(kind(), s, where);
  adamw_->load_state(s, where);
  if (muon_) muon_->load_state(s, where);
}

}  // namespace folio
