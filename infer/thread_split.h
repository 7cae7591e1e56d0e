#pragma once
// The decoder's one way to share work between its threads: [0, count) cut into
// contiguous ranges, one per OpenMP thread, so each thread reads a contiguous run of
// weights (products) or of heads (attention).
#include <cstdint>

#include <omp.h>

namespace folio::infer {

// f(thread, first, last), `thread` the range's index (0 to threads - 1) for its scratch;
// on the calling thread alone, as thread 0, when threads is 1 (no parallel region).
template <class F>
void split_indexed(int threads, int64_t count, F f) {
  if (threads <= 1) return f(int64_t(0), int64_t(0), count);
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
    f(t, count * t / T, count * (t + 1) / T);
  }
}

// f(first, last), for work that needs no scratch of its own.
template <class F>
void split(int threads, int64_t count, F f) {
  split_indexed(threads, count, [&](int64_t, int64_t first, int64_t last) { f(first, last); });
}

}  // namespace folio::infer
