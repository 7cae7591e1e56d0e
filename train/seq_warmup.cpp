#include "train/seq_warmup.h"

#include <algorithm>

#include "train/warmup_ramp.h"

namespace folio {

int64_t seq_warmup_stage(int64_t block_size) { return std::max<int64_t>(8, block_size / 8); }

int64_t window_length(int64_t step, int64_t block_size, int64_t warmup) {
  return staged_ramp(step, block_size, warmup, seq_warmup_stage(block_size));
}

}  // namespace folio
