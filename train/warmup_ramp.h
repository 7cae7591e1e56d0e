#pragma once
// The ramp a size follows during a warm-up (train/seq_warmup.h, train/batch_warmup.h):
// a function of the step alone, so a resumed run takes the sizes the uninterrupted
// one would have.
#include <algorithm>
#include <cstdint>

namespace folio {

// One `stage` at step 0, rising on a straight line, rounded down to a multiple of the
// stage, to `full` at step `warmup`; `full` from then on, and throughout when warmup is
// 0 or full is no more than a stage. Whole stages bound the sizes a warm-up makes to
// full / stage + 1, and each size is a shape the buffer pool and oneDNN's primitives
// keep. step < warmup <= 2^40 and full <= 2^20 (the limits of a run): no overflow.
inline int64_t staged_ramp(int64_t step, int64_t full, int64_t warmup, int64_t stage) {
  if (warmup <= 0 || step >= warmup || full <= stage) return full;
  const int64_t linear = stage + (full - stage) * step / warmup;
  return std::max(stage, linear / stage * stage);
}

}  // namespace folio
