#pragma once
// The size warm-ups: the first steps train on short windows (--seq-warmup N) or on few
// sequences (--batch-warmup N), which cost less, and the sizes grow to the model's
// context and to --batch-size over N steps. Early on a model learns short-range
// statistics, which short windows teach as well as long ones, and the gradient's
// signal is large beside its noise, so a small batch moves the weights as far per step
// as a large one: the time they save goes to later steps. Evaluations always use the
// whole context, and each step's gradient is the mean over its own batch. Every size
// is a function of the step alone: a resumed run draws the windows and batches the
// uninterrupted one would have.
#include <cstdint>

namespace folio {

// The lengths a sequence warm-up runs through are multiples of this stage: 8 tokens,
// or an eighth of the context when that is longer. Every length is a new shape for the
// buffer pool and oneDNN's primitives to keep, so a warm-up makes eight or nine of
// them, whatever the context.
int64_t seq_warmup_stage(int64_t block_size);
// The training window of step `step` (0-based): one stage at step 0, rising linearly
// (rounded down to a multiple of the stage) to block_size at step `warmup`, and
// block_size from then on. block_size itself when warmup is 0 or the context is no
// longer than a stage (8 tokens or fewer).
int64_t window_length(int64_t step, int64_t block_size, int64_t warmup);

// The batch sizes a batch warm-up runs through are multiples of this stage: an eighth
// of the batch, rounded up, so a warm-up makes at most nine shapes.
int64_t batch_warmup_stage(int64_t batch_size);
// The sequences of step `step` (0-based): one stage at step 0, rising linearly (rounded
// down to a multiple of the stage) to batch_size at step `warmup`, and batch_size from
// then on. batch_size itself when warmup is 0.
int64_t batch_size_at(int64_t step, int64_t batch_size, int64_t warmup);

}  // namespace folio
