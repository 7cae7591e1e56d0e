#pragma once
// The training loop: batches, forward/backward, clipping, AdamW on the schedule,
// periodic evaluation, progress, the loss log, and checkpoints that resume exactly.
#include <memory>
#include <string>

#include "data/dataset.h"
#include "train/checkpoint.h"
#include "train/data_parallel.h"

namespace folio {

struct TrainOptions {
  nn::GPTConfig model;
  TrainConfig train;
  std::string out_dir = "out";
  bool resume = false;
  bool quiet = false;  // no progress output (tests)
  // How the threads share a training step: one batch shard each (train/data_parallel.h),
  // or all of them inside each op. Evaluation always runs inside the ops.
  bool data_parallel = true;
};

class Trainer {
 public:
  // Loads the corpus and builds the model, or (resume) restores both from out_dir.
  // For a resumed run `options` carries the saved configs, already merged by the caller.
  explicit Trainer(TrainOptions options);

  struct Losses {
    float train = 0, val = 0;
  };
  Losses evaluate();  // mean loss over eval_iters batches of each split, in eval mode
  // Trains until max_iters (or a SIGINT), saving at every evaluation and at the end.
  // Returns the last evaluation.
  Losses run();

  const nn::GPT& model() const { return *model_; }
  const Vocab& vocab() const { return corpus_.vocab; }
  int64_t step() const { return step_; }

 private:
  void save(const Losses& losses);
  TrainOptions opt_;
  Corpus corpus_;
  std::unique_ptr<nn::GPT> model_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<DataParallel> data_parallel_;  // null: one model, threads inside the ops
  Rng data_rng_;
  int64_t step_ = 0;
  float best_val_ = 0;
  bool has_best_ = false;
};

// Reads the training options saved in DIR/state.safetensors (for --resume).
TrainState saved_run(const std::string& out_dir);

}  // namespace folio
