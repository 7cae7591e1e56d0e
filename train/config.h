#pragma once
// The options of a training run other than the model's shape, and the limits every
// run's options stay within (the checkpoint reader enforces the same ones, so what a
// run accepts, it can save and read back).
#include <cstdint>
#include <string>

#include "autograd/ops.h"

namespace folio {

struct TrainConfig {
  static constexpr int64_t kMaxBatch = int64_t(1) << 20, kMaxIters = int64_t(1) << 40;

  std::string data;             // corpus path
  std::string recipe;           // the --config file the options came from ("" if none)
  double train_fraction = 0.9;
  int64_t batch_size = 12;
  int64_t max_iters = 2000;
  int64_t warmup_iters = 100;
  int64_t lr_decay_iters = 0;   // the cosine reaches min_lr here; 0: at max_iters
  int64_t eval_interval = 250;
  int64_t eval_iters = 50;
  int64_t log_interval = 50;
  float lr = 1e-3f, min_lr = 1e-4f;
  float weight_decay = 0.1f, beta2 = 0.99f, grad_clip = 1.0f;
  uint64_t seed = 1337;
  // Precision of the matrix products (autograd/ops.h); weights, moments and
  // checkpoints stay fp32 either way. Absent from runs saved before it existed: fp32.
  Precision dtype = Precision::fp32;
  void validate() const;  // throws "[config] <field> ..." for out-of-range values
};

}  // namespace folio
