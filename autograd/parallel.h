#pragma once
// OpenMP helpers for folio's own kernels. oneDNN (Debian's build) uses the same
// OpenMP runtime, so both share one thread pool and one thread count.
#include <cstdint>

namespace folio {

void set_num_threads(int n);  // <= 0: OMP_NUM_THREADS if set, else all cores
int num_threads();

// Below this many elements of work a kernel stays on one thread: forking costs more.
constexpr int64_t kParallelGrain = 1 << 14;

}  // namespace folio
