#pragma once
// Memory bandwidth as STREAM's triad measures it: a[i] = b[i] + s * c[i] over three
// arrays far larger than the caches, on the threads of folio's setting (OpenMP).
// Bytes counted as STREAM counts them: 3 arrays of 8-byte doubles a pass (the write's
// read for ownership not counted). The best of `passes` is the figure, as STREAM's.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace folio::bench {

struct Triad {
  double gb_per_s = 0;    // best pass
  int64_t bytes = 0;      // a pass's, as counted
  int threads = 1;
};

inline Triad triad(int64_t elements = int64_t(1) << 25, int passes = 10) {  // 3 x 256 MiB
  struct Free {
    void operator()(double* p) const { std::free(p); }
  };
  auto alloc = [&] { return std::unique_ptr<double[], Free>(static_cast<double*>(std::aligned_alloc(64, elements * 8))); };
  auto a = alloc(), b = alloc(), c = alloc();
  double *A = a.get(), *B = b.get(), *C = c.get();
  // Each thread first touches the pages it later reads (first-touch placement).
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < elements; ++i) A[i] = 1.0, B[i] = 2.0, C[i] = 0.5;
  Triad t;
  t.bytes = 3 * 8 * elements;
  t.threads = omp_get_max_threads();
  double best = 1e30;
  for (int p = 0; p < passes; ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    const double s = 3.0 + p;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < elements; ++i) A[i] = B[i] + s * C[i];
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (A[elements / 2] != 2.0 + (3.0 + passes - 1) * 0.5) std::abort();  // the loop ran
  t.gb_per_s = double(t.bytes) / best / 1e9;
  return t;
}

}  // namespace folio::bench
