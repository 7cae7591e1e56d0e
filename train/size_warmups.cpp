#include "train/size_warmups.h"

#include <algorithm>

namespace folio {
namespace {

// One `stage` at step 0, rising on a straight line, rounded down to a multiple of the
// stage, to `full` at step `warmup`; `full` from then on, and throughout when warmup is
// 0 or full is no more than a stage. Whole stages bound the sizes a warm-up makes to
// full / stage + 1, and each size is a shape the buffer pool and oneDNN's primitives
// keep. step < warmup <= 2^40 and full <= 2^20 (the limits of a run): no overflow.
int64_t staged_ramp(int64_t step, int64_t full, int64_t warmup, int64_t stage) {
  if (warmup <= 0 || step >= warmup || full <= stage) return full;
  const int64_t linear = stage + (full - stage) * step / warmup;
  return std::max(stage, linear / stage * stage);
}

}  // namespace

int64_t seq_warmup_stage(int64_t block_size) { return std::max<int64_t>(8, block_size / 8); }

int64_t window_length(int64_t step, int64_t block_size, int64_t warmup) {
  return staged_ramp(step, block_size, warmup, seq_warmup_stage(block_size));
}

int64_t batch_warmup_stage(int64_t batch_size) { return std::max<int64_t>(1, (batch_size + 7) / 8); }

int64_t batch_size_at(int64_t step, int64_t batch_size, int64_t warmup) {
  return staged_ramp(step, batch_size, warmup, batch_warmup_stage(batch_size));
}

}  // namespace folio
