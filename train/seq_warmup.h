#pragma once
// Sequence-length warm-up (--seq-warmup N): the first steps train on short windows,
// which cost less, and the windows grow to the model's context over N steps. Early
// on a model learns short-range statistics, which short windows teach as well as
// long ones, so the time they save goes to later steps. Evaluations always use the
// whole context. The length is a function of the step alone: a resumed run draws the
// windows the uninterrupted one would have.
#include <cstdint>

namespace folio {

// The lengths a warm-up runs through are multiples of this stage: 8 tokens, or an
// eighth of the context when that is longer. Every length is a new shape for the
// buffer pool and oneDNN's primitives to keep, so a warm-up makes eight or nine of
// them, whatever the context.
int64_t seq_warmup_stage(int64_t block_size);

// The training window of step `step` (0-based): one stage at step 0, rising linearly
// (rounded down to a multiple of the stage) to block_size at step `warmup`, and
// block_size from then on (train/warmup_ramp.h). block_size itself when warmup is 0 or
// the context is no longer than a stage (8 tokens or fewer).
int64_t window_length(int64_t step, int64_t block_size, int64_t warmup);

}  // namespace folio
