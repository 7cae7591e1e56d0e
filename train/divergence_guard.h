#pragma once
// The guards of a training run against divergence (TrainConfig::on_divergence). After
// each step's backward and before its update, the step's loss and global gradient norm
// (the clip's: the check adds a few comparisons to a step) must be finite and must not
// spike. A spike is a z-score above spike_threshold (the loss's) or grad_spike_threshold
// (the norm's) against the last spike_window accepted steps, as llm.c's outlier
// detector computes it, with three differences: the step is measured against the
// window without itself (a spike does not widen the spread that judges it); only
// accepted steps join the window (a dropped one does not teach it that spikes are
// normal); and the test starts once kMinWindow steps are in it, not the whole window,
// so that a learning rate too high for the run is caught in its first steps.
// What follows a failed check is the policy's, in the trainer (train/trainer_divergence.cpp).
//   GuardState       what the run saves (train/run_state.h): the window, the counters
//   DivergenceGuard  the checks, the window, and the health figures of log.csv
//   first_non_finite the parameter whose gradient went non-finite first, for messages
#include <cstdint>
#include <string>
#include <vector>

#include "nn/module.h"
#include "train/config.h"
#include "train/progress.h"

namespace folio {

struct GuardState {
  // The last accepted steps' loss and gradient norm, oldest first: (W,) each, W <=
  // spike_window.
  std::vector<float> losses, norms;
  int64_t skipped = 0;           // updates dropped over the run (--on-divergence skip)
  int64_t skipped_in_a_row = 0;  // the steps just before this one that were dropped
  int64_t rollbacks = 0;
  // The product of the rollbacks' rollback_lr_factor: saved as it is, so a resume with
  // another factor keeps what the earlier rollbacks did.
  float lr_scale = 1;
  // The furthest step the run has begun (-1: none): a step begun again after a rollback
  // is not new (a --fault-inject fault fires once).
  int64_t furthest_step = -1;
};

class DivergenceGuard {
 public:
  // A run that skips more steps in a row than this is stopped: its weights, not a
  // batch, are at fault.
  static constexpr int64_t kMaxSkipsInARow = 10;
  // The spike tests start once the window holds this many steps (or all of a shorter one).
  static constexpr int64_t kMinWindow = 10;

  DivergenceGuard() = default;
  DivergenceGuard(const TrainConfig& config, GuardState state);

  // Step `step` begins; true the first time the run reaches it.
  bool begin(int64_t step);
  // Why a step with this loss and gradient norm must not update ("" if it may): "the
  // loss became nan", "the gradient norm 41.2 is a spike: ...". With the guards off,
  // only a non-finite value (which ends the run).
  std::string verdict(float loss, float grad_norm) const;
  // The step updated: its figures join the window; `clipped`: the clip scaled its gradient.
  void accepted(float loss, float grad_norm, bool clipped);
  // The step's update is dropped; false when too many in a row were (kMaxSkipsInARow).
  bool skip();
  // Gone back to a checkpoint whose guards were `target`: its window again, one more
  // rollback, the learning rate scaled by `factor` (the counters go on).
  void rolled_back(const GuardState& target, float factor);

  float lr_scale() const { return state_.lr_scale; }
  float mean_loss() const;  // of the window (0 when empty)
  const GuardState& state() const { return state_; }
  // Since the last call: the mean gradient norm and the fraction clipped of the accepted
  // steps, and the run's counters; then starts again (at every evaluation).
  Health take_health();

 private:
  // The z-score of x against `window` once it holds kMinWindow steps, else 0 (and 0
  // with no spread, as llm.c's).
  double z_score(const std::vector<float>& window, float x) const;

  float threshold_ = 0, grad_threshold_ = 0;  // 0: no spike test
  int64_t window_ = 100;
  bool off_ = false;
  GuardState state_;
  double norm_sum_ = 0;  // of the accepted steps since take_health()
  int64_t steps_ = 0, clipped_ = 0;
};

// "blocks.0.attn.qkv.weight": the first parameter (in the model's order) with a
// non-finite gradient, or "" if none has one.
std::string first_non_finite(const nn::NamedParameters& params);

}  // namespace folio
