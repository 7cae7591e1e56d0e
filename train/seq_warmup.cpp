#include "train/seq_warmup.h"

#include <algorithm>

namespace folio {

int64_t seq_warmup_stage(int64_t block_size) { return std::max<int64_t>(8, block_size / 8); }

int64_t window_length(int64_t step, int64_t block_size, int64_t warmup) {
  const int64_t stage = seq_warmup_stage(block_size);
  if (warmup <= 0 || step >= warmup || block_size <= stage) return block_size;
  // step < warmup <= 2^40 and block_size <= 2^16 (the limits of a run): no overflow.
  const int64_t linear = stage + (block_size - stage) * step / warmup;
  return std::max(stage, linear / stage * stage);
}

}  // namespace folio
