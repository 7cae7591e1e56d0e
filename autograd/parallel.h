#pragma once
// OpenMP helpers for folio's own kernels. oneDNN (Debian's build) uses the same
// OpenMP runtime, so both share one thread pool and one thread count.
#include <cstdint>

namespace folio {

// The most threads any command, recipe or folio.set_threads may ask for: more than the
// hardware threads of any CPU folio runs on, and far below where the OpenMP runtime
// breaks (it fails to create ~40,000 threads, and 65,536 crash it).
constexpr int kMaxThreads = 1024;

// n: 0 means OMP_NUM_THREADS if set, else all cores. Outside [0, kMaxThreads] it throws
// "[threads] ..." and changes nothing.
void set_num_threads(int64_t n);
int num_threads();

// Below this many elements of work a kernel stays on one thread: forking costs more.
constexpr int64_t kParallelGrain = 1 << 14;

// dst[i] (+)= f(in[i]...) for i < n: stored when `store` (a gradient's first
// contribution, see InputGrads::write, or an output), else added. f takes floats and
// the arrays come in as arguments: behind a lambda that indexes captured pointers,
// GCC turns the loads into gathers and the loop runs several times slower.
template <class F, class... In>
void flat_map(float* dst, bool store, int64_t n, F f, const In*... in) {
  if (store) {
#pragma omp parallel for simd if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) dst[i] = f(in[i]...);
  } else {
#pragma omp parallel for simd if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) dst[i] += f(in[i]...);
  }
}

}  // namespace folio
