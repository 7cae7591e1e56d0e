#pragma once
// A size-bucketed cache of float buffers, one per thread. A training step repeats the
// same shapes, so after the first step every request is served from the cache: no
// malloc, and no freshly mapped pages to fault in (about 10 us per 4 KiB page on
// these machines). Thread-safe; the statistics count all threads.
#include <cstddef>
#include <cstdint>

namespace folio::pool {

float* acquire(size_t n);            // n floats, 64-byte aligned, contents undefined
void release(float* p, size_t n);    // give back a buffer from acquire(n), from any thread
// A training loop's two trims of the calling thread's cache, so that what one moment
// needed (a checkpoint's copy of the optimizer's moments, an evaluation's other shapes)
// does not stay cached beside what every step needs: in GPT-2 small's fine-tune it held
// ~2 GB. end_step(), after each step, frees the cached buffers of each size its
// acquire() did not ask for since the last end_step(); keep_step_sizes(), after an
// evaluation and a save, those of each size the last step did not ask for (before any
// step: all of them).
void end_step();
void keep_step_sizes();

struct Stats {
  uint64_t requests = 0;       // acquire() calls
  uint64_t fresh = 0;          // of which needed a new allocation
  uint64_t bytes_cached = 0;   // held in the cache now
  uint64_t bytes_in_use = 0;   // handed out and not yet released
  uint64_t bytes_in_use_peak = 0;  // the most bytes_in_use has been since reset_peak()
};
Stats stats();
// Starts a new high-water mark at the bytes in use now (a benchmark's step: its peak
// less what was in use before it is the memory the step itself takes).
void reset_peak();

}  // namespace folio::pool
