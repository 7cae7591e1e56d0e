#pragma once
// A run's state: what --resume needs beyond the weights, in DIR/state.safetensors.
//   TrainState          the step, the RNG states, the best validation loss, the
//                       training time, where the sampler is, the training options,
//                       the optimizer's state (opaque: train/optimizer_state.h) and
//                       the average of the weights, and the divergence guards' window
//                       and counters
//   save_state          writes it: the optimizer's tensors, then "ema.weights"; the
//                       __metadata__ has the format, the step, the optimizer's
//                       counters, then the run's fields and "train_config" (JSON)
//   load_state          reads it back, every field checked (errors name the file)
//   load_state_settings the same but for the optimizer's tensors and the weights'
//                       average, from the header alone: what folio info shows and
//                       --resume's options need (GPT-2 small's moments are ~1 GB)
//   recover_run         --resume's first read: the state, after RunDir has finished
//                       or dropped a save that was cut short (io/run_dir.h)
//   save_run            one commit of a run directory: the weights and this state
//   saved_run           the settings saved in a run directory (its options, for --resume)
//   lost_best, lost_log what --resume says of a best.safetensors or log.csv gone or damaged
#include <cstdint>
#include <string>
#include <vector>

#include "base/rng.h"
#include "data/tokenizer.h"
#include "io/run_dir.h"
#include "nn/transformer.h"
#include "train/config.h"
#include "train/divergence_guard.h"
#include "train/optimizer_state.h"

namespace folio {

struct TrainState {
  int64_t step = 0;
  float best_val_loss = 0;
  Rng::State data_rng{}, dropout_rng{};
  TrainConfig config;
  OptimizerState optimizer;  // Optimizer::state(); checked against config.optimizer on load
  double train_seconds = 0;  // the steps' time so far (train/config.h: max_time)
  // Where --sampling epoch is in its pass (data/batch_sampler.h), and the data's
  // fingerprint (data/token_source.h), which --resume checks: absent from older runs
  // ("" for a text or conversations saved before they had one).
  int64_t data_epoch = 0, data_position = 0;
  std::string data_fingerprint;
  std::vector<float> ema_weights;  // config.ema > 0: (P,) the average of the weights, flat
  GuardState guards;  // absent from older runs: an empty window, no skip or rollback yet
  // The processes (MPI ranks) the run's steps last ran on, which share out each batch and
  // so order the gradient's sums, as its threads do: absent from older runs, 0 (not known).
  int64_t ranks = 0;
};

void save_state(const std::string& file, const TrainState& state);
TrainState load_state(const std::string& file);
// optimizer.tensors and ema_weights empty, and the optimizer's state not checked
// against the config (load_state checks it).
TrainState load_state_settings(const std::string& file);

TrainState recover_run(const RunDir& run);
// `best`: the weights to keep as best.safetensors, or null (RunDir::save).
void save_run(const RunDir& run, const nn::GPT& model, const Tokenizer& tokenizer, const TrainState& state,
              const nn::GPT* best, bool first);
TrainState saved_run(const std::string& dir);
// --resume: "" when the run's best.safetensors reads; else why not, and what follows.
// Gone (a copy of the run made without it) or damaged, it no longer holds the weights of
// the state's best val loss `best_val`, and a resumed run whose evaluations stayed above
// that loss ended without one, saying nothing: the trainer takes its next evaluation as
// the best instead.
std::string lost_best(const RunDir& run, float best_val);
// --resume: "" when the run's log.csv has its header; else that it is missing or empty,
// and that a new one starts after the run's `step` (train/progress.h writes it).
std::string lost_log(const RunDir& run, int64_t step);

}  // namespace folio
