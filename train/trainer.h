#pragma once
// The training loop: batches, forward/backward, clipping, the optimizer (AdamW, or Muon
// and AdamW) on the schedule, periodic evaluation and checkpoints that resume exactly,
// on one process or on the ranks of an MPI launch (train/distributed.h). A run ends at
// max_iters or when its training time reaches max_time (train/config.h).
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "data/batch_sampler.h"
#include "data/dataset.h"
#include "train/chat_data.h"
#include "io/checkpoint.h"
#include "io/run_dir.h"
#include "train/config.h"
#include "train/data_parallel.h"
#include "train/divergence_guard.h"
#include "train/fault_inject.h"
#include "train/optimizer.h"
#include "train/progress.h"
#include "train/run_state.h"
#include "train/task_evals.h"
#include "train/gradient_buckets.h"
#include "train/update_ratio.h"
#include "train/weight_average.h"

namespace folio {

struct TrainOptions {
  nn::GPTConfig model;
  TrainConfig train;
  std::string out_dir = "out";
  bool resume = false;
  bool overwrite = false;  // the run in out_dir may be replaced (the CLI refuses otherwise)
  bool quiet = false;  // no progress output (tests)
  // How the threads share a training step: one batch shard each (train/data_parallel.h),
  // or all of them inside each op. Evaluation always runs inside the ops.
  bool data_parallel = true;
  // On several ranks: the gradient all-reduce in buckets during the backward pass
  // (train/gradient_buckets.h), or in one call after it. The weights are the same.
  bool overlap = true;
  // On several ranks: seconds a rank may wait in one exchange before it ends the job
  // (train/distributed.h: set_timeout); 0: no limit.
  double comm_timeout = 300;
  // A run started --init-from a checkpoint keeps that checkpoint's dropout unless
  // --dropout was given (the one model option a fine-tuning run may change).
  bool dropout_given = false;
  // Faults the run suffers on purpose, for tests of the divergence guards (train/fault_inject.h).
  std::vector<Fault> faults;
  // Every op's output and every gradient checked for non-finite values (slow; for
  // debugging): the first op to produce one, and its module, stop the run (exit 3).
  bool detect_anomaly = false;
  // Task files scored at evaluations, into log.csv's columns (train/task_evals.h).
  TaskEvals task_evals;
};

class Trainer {
 public:
  // Loads the corpus and builds the model (with a new tokenizer, or from
  // train.init_from's weights and tokenizer), or (resume) restores both from out_dir.
  // For a resumed run `options` carries the saved training options, already merged by
  // the caller; the model's config comes from the checkpoint.
  explicit Trainer(TrainOptions options);

  struct Losses {
    float train = 0, val = 0;
  };
  // Mean loss over eval_iters batches of each split, in eval mode: every rank takes
  // its share of each batch, and the figure is the single-process one. With --ema,
  // of the averaged weights (what best.safetensors keeps).
  Losses evaluate();
  // Trains until max_iters, max_time (or a SIGINT, SIGTERM or SIGPIPE), saving at every
  // evaluation and at the end. Returns the last evaluation.
  Losses run();
  // The signal that stopped run() early, 0 if none did.
  int stop_signal() const { return stop_signal_; }
  // Why the divergence guards stopped run() (folio train exits 3), "" if they did not.
  const std::string& diverged() const { return stop_reason_; }

  const nn::GPT& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return *data_.tokenizer; }
  const TrainingData& data() const { return data_; }
  // What --resume could not check of the data (train/chat_data.h), "" if nothing: the
  // caller says it.
  const std::string& data_warning() const { return data_warning_; }
  // What --resume found missing or damaged in the run directory (best.safetensors,
  // log.csv), and what the run does about it: the caller says it.
  const std::vector<std::string>& resume_warnings() const { return resume_warnings_; }
  int64_t step() const { return step_; }
  // Seconds spent in training steps, over the whole run (resumes included): evaluations
  // and saves are not counted. On several ranks, rank 0's clock.
  double train_seconds() const { return train_seconds_; }

 private:
  // This rank's part of a step's loss, and of its next-token loss (without --mtp's
  // term: what evaluations measure and the progress line shows).
  struct LossParts {
    double loss = 0, next_token = 0;
  };
  // Forward and backward of this rank's share of one of the step's grad_accum
  // micro-batches: adds the gradient of its mean loss into the parameters' and returns
  // this rank's part of the step's losses. After the `last`, the gradients are those of
  // the step's mean loss, summed across ranks (dist::sum the returned parts for the loss).
  LossParts forward_backward(const Batch& batch, bool last);
  // Saves the weights and `state` (state(), taken before the evaluation's checks), and
  // the weights as best.safetensors when `losses` are the lowest so far.
  void save(const Losses& losses, TrainState state);
  // What save() writes beside the weights: copied, or with the optimizer's tensors
  // shared (a save right after it, between two steps).
  TrainState state() const;
  TrainState shared_state() const;
  // Fails when the ranks' weights are no longer identical (they must be, bit for bit).
  void check_ranks_agree() const;

  // run()'s parts.
  Progress::Options progress_options() const;
  void announce(Progress& progress) const;  // the run's first lines: the model, its data, the optimizer
  std::string kept() const;  // what is left on disk, for the message of a diverged run
  // Evaluates, logs and saves, step 0's too (the weights a run starts from may stay its
  // best); an unsound evaluation (train/save_check.h) diverges before anything is
  // logged or saved, so a checkpoint never holds diverged weights or a state that does
  // not read back. False when the run diverged (and rolled back, or stops).
  bool evaluate_and_save(Progress& progress, const Schedule& schedule);
  // One optimizer step: grad_accum micro-batches, the clip, the guards, the update, the
  // progress line; then the next step (or, rolled back, the checkpoint's).
  void train_step(Progress& progress, const Schedule& schedule, const std::vector<Tensor>& params, Batch& batch);

  // The divergence guards' policy (train/trainer_divergence.cpp).
  // `why` happened at step_: its gradients are dropped, and the step skipped (when
  // `can_skip`: its update is not made yet), the run rolled back, or stopped.
  void diverged(Progress& progress, const std::string& why, bool can_skip);
  void roll_back(Progress& progress, const std::string& why);
  // --detect-anomaly: true when an op of this step produced a non-finite value on some
  // rank; the run then stops (nothing updated, nothing new saved) saying which op.
  bool anomaly_stops();
  // A fresh run keeps its start in memory until its first save: the checkpoint a
  // rollback goes back to before there is one on disk.
  void keep_start();
  void report_end(Progress& progress, bool interrupted, int64_t first_step, double run_start_seconds);

  TrainOptions opt_;
  RunDir run_dir_;
  TrainingData data_;
  std::string data_warning_;  // check_resumed_data's
  std::vector<std::string> resume_warnings_;  // rank 0's: files that --resume found missing or damaged
  std::unique_ptr<nn::GPT> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<DataParallel> data_parallel_;  // null: one model, threads inside the ops
  BatchSampler sampler_;  // the training windows' order and position
  std::unique_ptr<GradientBuckets> buckets_;     // null: one rank, or --overlap off
  std::unique_ptr<WeightAverage> average_;       // null: no --ema
  double exposed_seconds_ = 0;                   // waited in buckets_->finish(), over this process's steps
  int64_t step_ = 0;
  double train_seconds_ = 0;
  float best_val_ = 0;
  bool has_best_ = false;
  int stop_signal_ = 0;
  int64_t saved_step_ = -1;  // the step of the checkpoint on disk (-1: none), for messages
  float saved_val_ = std::numeric_limits<float>::quiet_NaN();  // its val loss (NaN: not known, resumed)
  int64_t best_step_ = -1;   // the step of best.safetensors (-1: not known, resumed)
  Losses last_{};            // the last evaluation
  double draw_seconds_ = 0;  // this run's time in drawing batches (reported at the end)
  // Where the sampler was when a bad-batch fault's step drew its batch (fault_inject.h).
  std::optional<BatchSampler::State> bad_batch_;
  std::unique_ptr<ChatBatches> chat_batches_;  // conversations: their batches and counts (null: text)
  std::string init_note_;  // said at the start: the --init-from model's vocabulary grew
  DivergenceGuard guard_;
  UpdateRatio update_ratio_;  // measured on the step before each evaluation, for its log row
  UpdateRatios last_update_ = Health().update_ratio;
  std::string stop_reason_;   // the guards stopped the run: why, and what is kept
  int64_t no_eval_at_ = -1;   // the step of the checkpoint the run resumed or rolled back to: evaluated already
  struct Start {
    std::vector<float> weights;  // (P,)
    TrainState state;
  };
  std::unique_ptr<RunDirLock> lock_;  // rank 0's from set-up to the end of run(): the run's one writer
  std::unique_ptr<Start> start_;  // keep_start()'s; null once a checkpoint is saved
};

}  // namespace folio
