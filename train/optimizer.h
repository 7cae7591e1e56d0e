#pragma once
// The optimizer of a run (TrainConfig::optimizer): AdamW over every parameter, or Muon
// over the hidden matrices (train/muon.h) with AdamW over the rest. Both follow one
// learning-rate schedule: at a step where AdamW's rate is lr (of the peak config.lr),
// Muon's is config.muon_lr * lr / config.lr.
#include <memory>

#include "train/adamw.h"
#include "train/config.h"
#include "train/muon.h"

namespace folio {

// Muon's settings in a run of `config`.
MuonConfig muon_config(const TrainConfig& config);

class Optimizer {
 public:
  Optimizer(const nn::NamedParameters& params, const TrainConfig& config);
  // `step` is the run's (Muon's momentum warm-up follows it; AdamW counts its own).
  void step(float lr, int64_t step);

  AdamW& adamw() { return *adamw_; }
  Muon* muon() { return muon_.get(); }  // null: AdamW alone
  OptimizerKind kind() const { return muon_ ? OptimizerKind::muon : OptimizerKind::adamw; }

 private:
  float peak_lr_, muon_lr_;
  std::unique_ptr<AdamW> adamw_;
  std::unique_ptr<Muon> muon_;
};

}  // namespace folio
