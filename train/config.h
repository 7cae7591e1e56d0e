#pragma once
// The options of a training run other than the model's shape, and the limits every
// run's options stay within (the checkpoint reader enforces the same ones, so what a
// run accepts, it can save and read back).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "data/batch_sampler.h"

namespace folio {

// What updates the weights: AdamW alone, or Muon on the hidden matrices with AdamW on
// the rest (train/muon.h).
enum class OptimizerKind { adamw, muon };
const char* to_string(OptimizerKind k);                                // "adamw", "muon"
std::optional<OptimizerKind> parse_optimizer(std::string_view name);  // nullopt: neither

// How the learning rate falls after the warm-up (train/adamw.h: Schedule): a cosine from
// lr to min_lr over the run, or warm-up-stable-decay: lr held, then a straight line to
// min_lr over the last `cooldown` fraction of the run.
enum class Decay { cosine, wsd };
const char* to_string(Decay d);                                 // "cosine", "wsd"
std::optional<Decay> parse_decay(std::string_view name);        // nullopt: neither

// What a step that diverges does (train/divergence_guard.h): its update dropped, the
// run rolled back to its last good checkpoint at a lower learning rate, or stopped
// (exit 3); off: no guards, and a non-finite value ends the run with an error (exit 1).
enum class OnDivergence { skip, rollback, stop, off };
const char* to_string(OnDivergence d);  // "skip", "rollback", "stop", "off"

// Each field's default, limits, flag and JSON key are its row in train/settings.cpp,
// which TrainConfig() and validate() read: a field without a row has no value.
struct TrainConfig {
  static constexpr int64_t kMaxBatch = int64_t(1) << 20, kMaxIters = int64_t(1) << 40;
  static constexpr double kMaxTime = 1e9;  // seconds: ~30 years
  static constexpr int64_t kMaxThreads = folio::kMaxThreads;  // autograd/parallel.h: every command's
  static constexpr int64_t kMaxSpikeWindow = 100000;  // steps: the window is saved with the run
  // The warm-up a run gets when none is asked for: kWarmupIters steps, at most a tenth
  // of a step limit, so that a short run (a 200-step fine-tune) spends most of its
  // steps at --lr. A run saves the number it used.
  static constexpr int64_t kWarmupIters = 100;
  static int64_t default_warmup(int64_t max_iters) {
    return max_iters > 0 && max_iters / 10 < kWarmupIters ? max_iters / 10 : kWarmupIters;
  }

  std::string data;             // corpus path
  std::string recipe;           // the --config file the options came from ("" if none)
  // How the run's tokenizer was made (data/tokenizer.h: TokenizerSpec): a method
  // (char, bpe, unigram) or a .model file, and the pieces asked for (0: the default).
  std::string tokenizer;
  int64_t vocab_size;
  std::string init_from;        // the checkpoint whose weights the run started from ("" if none)
  double train_fraction;
  int64_t batch_size;
  // Micro-batches of batch_size per optimizer step: the step's gradient is of their
  // mean loss (as one batch of grad_accum * batch_size), and ranks exchange it once.
  int64_t grad_accum;
  int64_t max_iters;            // 0: no step limit (then max_time must bound the run)
  // A budget of training seconds (the steps' time, not the evaluations'); 0: none.
  // The run stops after the step that reaches it. With max_iters and lr_decay_iters 0,
  // the cosine follows it: its progress is training seconds / max_time.
  double max_time;
  int64_t warmup_iters;
  int64_t lr_decay_iters;       // the decay reaches min_lr here; 0: at max_iters (or max_time)
  // The shape of the decay, and for wsd the share of the run it takes.
  Decay decay;
  float cooldown;
  int64_t eval_interval;
  int64_t eval_iters;
  int64_t log_interval;
  float lr, min_lr;
  float weight_decay, beta2, grad_clip;
  // Muon's rate follows the schedule scaled to muon_lr (muon_lr * lr(step) / lr); its
  // weight decay is its own.
  OptimizerKind optimizer;
  float muon_lr, muon_weight_decay;
  // Steps over which Muon's momentum rises from 0.85 to 0.95 (train/muon.h); 0: 0.95
  // from the start.
  int64_t muon_momentum_warmup;
  uint64_t seed;
  // > 0: an exponential moving average of the weights, with this decay per step, is
  // what evaluations measure and best.safetensors holds (train/weight_average.h). 0: off.
  float ema;
  // Precision of the matrix products (autograd/ops.h); weights, moments and
  // checkpoints stay fp32 either way.
  Precision dtype;
  Sampling sampling;  // the order of training windows (data/batch_sampler.h)
  // Steps over which the training windows grow from a stage (8 tokens, or an eighth of
  // the context) to block_size (train/size_warmups.h); 0: block_size from the start.
  // Random sampling only: epoch sampling cuts the text into windows of one length.
  int64_t seq_warmup;
  // Steps over which the batch grows from an eighth of batch_size to batch_size
  // (train/size_warmups.h); 0: batch_size from the start.
  int64_t batch_warmup;
  // The threads the run's steps ran on (the trainer records them). With data
  // parallelism they are the batch's shard count, and so the order in which the
  // gradient is summed: --resume runs on them again unless --threads is given.
  int64_t threads;
  // The divergence guards (train/divergence_guard.h): the policy; the z-score of a spike
  // of the loss and of the gradient norm, and the accepted steps it is measured over
  // (threshold 0: no spike test); a rollback's factor on the learning rate, and how
  // many rollbacks a run may make.
  OnDivergence on_divergence;
  float spike_threshold, grad_spike_threshold;
  int64_t spike_window;
  float rollback_lr_factor;
  int64_t max_rollbacks;

  TrainConfig();          // every field at its row's default
  void validate() const;  // throws "[config] <field> ..." for out-of-range values
  // The cosine follows max_time rather than a step count.
  bool schedule_follows_time() const { return max_iters == 0 && lr_decay_iters == 0; }
};

}  // namespace folio
