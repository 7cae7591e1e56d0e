#include "train/batch_warmup.h"

#include <algorithm>

#include "train/warmup_ramp.h"

namespace folio {

int64_t batch_warmup_stage(int64_t batch_size) { return std::max<int64_t>(1, (batch_size + 7) / 8); }

int64_t batch_size_at(int64_t step, int64_t batch_size, int64_t warmup) {
  return staged_ramp(step, batch_size, warmup, batch_warmup_stage(batch_size));
}

}  // namespace folio
