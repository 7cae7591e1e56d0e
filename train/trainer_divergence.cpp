// What the trainer does when a step or an evaluation diverges (TrainConfig::
// on_divergence; the checks are train/divergence_guard.h's): skip the step's update,
// roll back to the last good checkpoint at a lower learning rate, stop (exit 3, nothing
// new saved), or with the guards off, fail as a run always did. Every rank takes the
// same decision from the same figures, so they stay in step. --detect-anomaly stops
// a run at the first op that produced a non-finite value.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "autograd/anomaly.h"
#include "train/distributed.h"
#include "train/trainer.h"

namespace folio {

std::string Trainer::kept() const {
  if (saved_step_ < 0) return cat("no checkpoint was saved in ", opt_.out_dir);
  // With the guards off an evaluation is saved whatever its loss, if finite: say what it was.
  const bool off = opt_.train.on_divergence == OnDivergence::off;
  const std::string val = std::isnan(saved_val_) ? "" : cat(", val loss ", saved_val_);
  return cat("the checkpoint of step ", saved_step_,
             off ? cat(" (the last saved", val, "; --on-divergence off saves any finite evaluation)")
                 : cat(" (the last that evaluated sound", val, ")"),
             " is kept in ", opt_.out_dir, ", and best.safetensors there ",
             best_step_ >= 0        ? cat("holds step ", best_step_, ", the lowest validation loss (", best_val_, ")")
             : std::isinf(best_val_) ? std::string("is missing or damaged (as it was when the run resumed)")
                                     : cat("has the lowest validation loss (", best_val_, ")"));
}

void Trainer::diverged(Progress& progress, const std::string& why, bool can_skip) {
  model_->zero_grad();
  const TrainConfig& tc = opt_.train;
  const std::string at = cat(why, " at step ", step_);
  const GuardState& g = guard_.state();
  auto stop = [&](const std::string& because) {
    stop_reason_ = cat(at, ": the run stops (--on-divergence ", to_string(tc.on_divergence), because, "); ", kept());
  };
  switch (tc.on_divergence) {
    case OnDivergence::off:
      fail("train", at, " (training diverged); ", kept());
    case OnDivergence::stop:
      return stop("");
    case OnDivergence::skip:
      if (!can_skip) return stop(": an evaluation found it, after the updates that made it");
      if (!guard_.skip())
        return stop(cat(": ", DivergenceGuard::kMaxSkipsInARow, " steps in a row were skipped, so the weights, not a "
                        "batch, are at fault"));
      if (dist::is_root()) progress.notice(cat(at, ": its update is skipped (", g.skipped, " so far)"));
      ++step_;
      return;
    case OnDivergence::rollback:
      if (g.rollbacks >= tc.max_rollbacks)
        return stop(cat(" after ", g.rollbacks, g.rollbacks == 1 ? " rollback" : " rollbacks", ": --max-rollbacks ",
                        tc.max_rollbacks));
      return roll_back(progress, at);
  }
}

void Trainer::roll_back(Progress& progress, const std::string& at) {
  // The last good checkpoint: the one on disk once the run saved one (a resumed run
  // starts from one), else the run's start, kept in memory.
  TrainState st;
  std::vector<float> weights;  // (P,)
  if (saved_step_ >= 0) {
    st = load_state(run_dir_.state_file());
    const ModelCheckpoint ck = load_model(run_dir_.model_file());
    const Tensor& w = ck.model->flat_parameters();
    weights.assign(w.data(), w.data() + w.numel());
  } else {
    st = start_->state;
    weights = start_->weights;
  }
  const Tensor& flat = model_->flat_parameters();
  if (int64_t(weights.size()) != flat.numel() || st.step > step_)
    fail("train", "cannot roll back to ", run_dir_.model_file(), ": its ", weights.size(), " weights at step ", st.step,
         " are not this run's ", flat.numel(), " before step ", step_);
  std::copy(weights.begin(), weights.end(), flat.data());
  flat.mark_modified();
  optimizer_->load_state(st.optimizer, run_dir_.state_file());
  // The data and dropout go on from here: the batches drawn since the checkpoint are not
  // drawn again. A spike that a batch made, not the weights, would come back with it
  // at every rollback, whatever the learning rate.
  if (average_) average_->restore(st.ema_weights);
  step_ = no_eval_at_ = st.step;
  guard_.rolled_back(st.guards, opt_.train.rollback_lr_factor);
  const GuardState& g = guard_.state();
  if (!dist::is_root()) return;
  progress.notice(cat(at, ": rolled back to step ", step_, " (rollback ", g.rollbacks, " of --max-rollbacks ",
                      opt_.train.max_rollbacks, "), the learning rate now ", g.lr_scale, " of the schedule's"));
  // The log keeps the rollback: the row of the step gone back to once more, with the
  // run's counts and learning rate now (its weights are that row's, so its losses too).
  progress.repeat_row(step_, schedule_of(opt_.train).at(step_, train_seconds_) * g.lr_scale, train_seconds_,
                      {.skipped = g.skipped, .rollbacks = g.rollbacks});
}

bool Trainer::anomaly_stops() {
  const std::string found = anomaly::take();
  if (!dist::any(!found.empty())) return false;
  model_->zero_grad();
  if (!found.empty() && !dist::is_root()) std::fprintf(stderr, "folio train: rank %d: %s\n", dist::rank(), found.c_str());
  stop_reason_ = cat("--detect-anomaly at step ", step_, ": ",
                     found.empty() ? "another rank found a non-finite value (its standard error says where)" : found,
                     "; the run stops; ", kept());
  return true;
}

void Trainer::keep_start() {
  const Tensor& flat = model_->flat_parameters();
  start_ = std::make_unique<Start>(Start{std::vector<float>(flat.data(), flat.data() + flat.numel()), state()});
}

}  // namespace folio
