#pragma once
// Batch-size warm-up (--batch-warmup N): the first steps take fewer sequences, which
// cost less, and the batch grows to --batch-size over N steps. Early in training the
// gradient's signal is large beside its noise, so a small batch moves the weights as
// far per step as a large one, and the time it saves goes to later steps. Each step's
// gradient is the mean over its own batch, at the step's learning rate. The size is a
// function of the step alone: a resumed run draws the batches the uninterrupted one
// would have.
#include <cstdint>

namespace folio {

// The batch sizes a warm-up runs through are multiples of this stage: an eighth of
// the batch, rounded up, so a warm-up makes at most nine shapes.
int64_t batch_warmup_stage(int64_t batch_size);

// The sequences of step `step` (0-based): one stage at step 0, rising linearly (rounded
// down to a multiple of the stage) to batch_size at step `warmup`, and batch_size from
// then on (train/warmup_ramp.h). batch_size itself when warmup is 0.
int64_t batch_size_at(int64_t step, int64_t batch_size, int64_t warmup);

}  // namespace folio
