#include "autograd/parallel.h"

#include <omp.h>

#include <cstdlib>

#include "base/error.h"

namespace folio {

void set_num_threads(int64_t n) {
  if (n < 0 || n > kMaxThreads)
    fail("threads", n, " is outside [0, ", kMaxThreads, "] (0: every core, or OMP_NUM_THREADS)");
  if (n > 0) return omp_set_num_threads(int(n));
  // Default: OMP_NUM_THREADS when the user set it (the OpenMP runtime already read
  // it), otherwise every core.
  if (!std::getenv("OMP_NUM_THREADS")) omp_set_num_threads(omp_get_num_procs());
}
int num_threads() { return omp_get_max_threads(); }

}  // namespace folio
