#pragma once
// The optimizer of a run (TrainConfig::optimizer): AdamW over every parameter, or Muon
// over the hidden matrices (train/muon.h) with AdamW over the rest. Both follow one
// learning-rate schedule: at a step where AdamW's rate is lr (of the peak config.lr),
// Muon's is config.muon_lr * lr / config.lr.
// Its state (train/optimizer_state.h) is opaque to what saves it: named flat tensors
// and counters, AdamW's then Muon's, each under the names it owns.
#include <memory>
#include <string>

#include "train/adamw.h"
#include "train/config.h"
#include "train/muon.h"
#include "train/optimizer_state.h"

namespace folio {

// Muon's settings in a run of `config`.
MuonConfig muon_config(const TrainConfig& config);

class Optimizer {
 public:
  Optimizer(const nn::NamedParameters& params, const TrainConfig& config);
  // `step` is the run's (Muon's momentum warm-up follows it; AdamW counts its own).
  void step(float lr, int64_t step);

  // The state, like PyTorch's state_dict: AdamW's, then Muon's, copied: the steps that
  // follow leave it as it is (a rollback's start).
  OptimizerState state() const;
  // The same tensors sharing the optimizer's buffers, as a state_dict's do: what a save
  // writes at once, without a copy of them beside it (GPT-2 small's moments: ~1 GB).
  // The next step changes them.
  OptimizerState shared_state() const;
  // Checks a state read from the file `where` is one an optimizer of `kind` saved:
  // every tensor and counter it needs, each well-formed, and no tensor it does not own.
  static void check_state(OptimizerKind kind, const OptimizerState& s, const std::string& where);
  // check_state, then every tensor must fit this optimizer's parameters; then takes it.
  void load_state(const OptimizerState& s, const std::string& where);

  AdamW& adamw() { return *adamw_; }
  Muon* muon() { return muon_.get(); }  // null: AdamW alone
  OptimizerKind kind() const { return muon_ ? OptimizerKind::muon : OptimizerKind::adamw; }

 private:
  float peak_lr_, muon_lr_;
  std::unique_ptr<AdamW> adamw_;
  std::unique_ptr<Muon> muon_;
};

}  // namespace folio
