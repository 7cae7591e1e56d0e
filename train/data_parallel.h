#pragma once
// Data parallelism across the cores of one machine, for models too small to keep
// several threads busy inside every op (PyTorch's DistributedDataParallel, in one
// process). The batch's sequences are split into one shard per thread; each thread
// runs forward and backward of its shard on its own replica of the model (the same
// weights, its own gradients) with every kernel single-threaded, and the replicas'
// gradients are then summed into the model's. The threads meet once per step instead
// of at the end of every op, and no core waits while the other runs serial code.
//
// The result is the gradient of the batch's mean loss, as model.forward().loss
// .backward() gives it, up to float rounding (the shards' sums are added in another
// order). With dropout, each replica draws its masks from its own generator, which is
// reseeded every step from the model's: a run is reproducible for a given number of
// shards, and a checkpoint of the model's generator resumes it exactly. The replicas
// follow the model's train()/eval() and set_precision() at every step.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "nn/transformer.h"
#include "train/gradient_buckets.h"

namespace folio {

class DataParallel {
 public:
  // Up to `shards` shards (>= 1), one per thread; shard 0 runs on `model` itself.
  DataParallel(nn::GPT& model, int shards);
  int shards() const { return int(replicas_.size()) + 1; }

  // ids, targets: (B, T). Accumulates the gradient of the mean cross-entropy over the
  // batch into the model's parameters and returns that loss. A batch of fewer than
  // `shards` sequences uses fewer shards. With `buckets` (begun for shards_used(B)
  // shards), each shard's backward reports its finished parameters to them, and they
  // add the shards' gradients into the model's bucket by bucket (their finish() ends
  // it) instead of all at once here.
  float forward_backward(std::span<const int32_t> ids, std::span<const int32_t> targets, int64_t B, int64_t T,
                         GradientBuckets* buckets = nullptr);
  // The loss model.forward(ids, B, T, targets).loss gives, up to float rounding, with no
  // graph: each shard on its own replica, as forward_backward splits the batch, so an
  // evaluation takes the buffers its training step takes (the memory pool serves them
  // again) and no core waits inside the ops. Through the model alone, the whole batch's
  // buffers were of other sizes and stayed in the pool beside the step's: GPT-2 small's
  // run at 2 x 1024 took ~3.5 GB more than its step. `weights` (another model of the
  // same config, such as a weight average): its shards run one after another on it,
  // threads inside the ops, in the step's buffer sizes all the same.
  float evaluate(std::span<const int32_t> ids, std::span<const int32_t> targets, int64_t B, int64_t T,
                 const nn::GPT* weights = nullptr);
  // The next-token part of the last forward_backward's loss: without --mtp's term
  // (nn/transformer.h: Output::next_token_loss), the same figure without it.
  float next_token_loss() const { return next_token_loss_; }
  int shards_used(int64_t B) const { return int(std::min<int64_t>(shards(), B)); }
  // The flat gradient of shard s (0: the model's), numel floats.
  float* shard_grad(int s) const;

 private:
  void check(std::span<const int32_t> ids, std::span<const int32_t> targets, int64_t B, int64_t T) const;
  // Shard s of n: its sequences [b0, b1) of the batch, and their ids and targets.
  struct Shard {
    int64_t b0, b1;
    std::span<const int32_t> ids, targets;
  };
  static Shard shard(std::span<const int32_t> ids, std::span<const int32_t> targets, int64_t B, int64_t T, int s,
                     int n);
  // Shard s's part of the mean over the targets the loss counts, for n shards: its rows'
  // share when every target counts (text), its targets' share when some are masked (chat).
  void count_shares(std::span<const int32_t> ids, std::span<const int32_t> targets, int64_t B, int64_t T, int n);
  // The replicas follow the model's train()/eval() and precision.
  void follow_model(int n);
  // Runs body(s) for s < n on one thread each; the first error is rethrown after.
  template <class Body>
  void each_shard(int n, Body body);

  nn::GPT& model_;
  std::vector<std::unique_ptr<nn::GPT>> replicas_;  // shards 1, 2, ...
  std::vector<float> losses_, next_token_losses_;   // per shard, scaled by its share
  std::vector<int64_t> counts_;                     // per shard: the targets its loss counts
  std::vector<float> shares_;                       // per shard: its part of the mean
  float next_token_loss_ = 0;
};

}  // namespace folio
