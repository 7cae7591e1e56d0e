#include "autograd/pool.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <unordered_map>
#include <vector>

namespace folio::pool {
namespace {

constexpr size_t kAlign = 64;
// Beyond this much cached memory (all threads together), released buffers are freed
// instead. Half the machine's memory: a training step's whole working set stays
// cached (re-faulting fresh pages costs ~10 us per 4 KiB), while odd shapes cannot
// hoard all of it.
uint64_t max_cached_bytes() {
  static const uint64_t cap = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) / 2 : uint64_t(4) << 30;
  }();
  return cap;
}

struct Counters {
  std::atomic<uint64_t> requests{0}, fresh{0}, bytes_cached{0}, bytes_in_use{0}, bytes_in_use_peak{0};
};
Counters g_counters;

// Each thread caches what it releases and serves its own requests from there: no
// lock, and a buffer comes back warm in this core's cache. (One shared cache cost
// data-parallel training 6% at config S and 13% at T: the threads contended for its
// lock and took each other's cold buffers.) A buffer released by another thread than
// the one that took it simply joins the releasing thread's cache.
struct FreeList {
  std::vector<float*> buffers;
  bool asked = false;          // acquire() asked for this size since the last end_step()
  bool asked_by_step = false;  // ... between the last two
  void free_all(size_t size) {
    for (float* p : buffers) std::free(p);
    g_counters.bytes_cached -= buffers.size() * size * sizeof(float);
    buffers.clear();
  }
};
struct ThreadCache {
  std::unordered_map<size_t, FreeList> free_lists;  // rounded size -> buffers
  ~ThreadCache() {
    for (auto& [size, list] : free_lists) list.free_all(size);
  }
};

// Null once this thread's cache is gone (at thread exit, or at program exit for the
// main thread, before static tensors release their buffers): buffers then go
// straight to malloc and free.
thread_local ThreadCache* t_cache = nullptr;
thread_local bool t_cache_dead = false;

ThreadCache* cache() {
  if (!t_cache && !t_cache_dead) {
    struct Owner {
      ThreadCache cache;
      Owner() { t_cache = &cache; }
      ~Owner() { t_cache = nullptr, t_cache_dead = true; }
    };
    thread_local Owner owner;
  }
  return t_cache;
}

size_t rounded(size_t n) { return (n + 15) & ~size_t(15); }  // whole 64-byte lines

}  // namespace

float* acquire(size_t n) {
  const size_t m = rounded(n ? n : 1);
  ++g_counters.requests;
  const uint64_t in_use = g_counters.bytes_in_use += m * sizeof(float);
  // The high-water mark: a relaxed load in the common case, a CAS only when it rises.
  uint64_t peak = g_counters.bytes_in_use_peak.load(std::memory_order_relaxed);
  while (in_use > peak && !g_counters.bytes_in_use_peak.compare_exchange_weak(peak, in_use)) {
  }
  if (ThreadCache* c = cache()) {
    FreeList& list = c->free_lists[m];
    list.asked = true;
    if (!list.buffers.empty()) {
      float* p = list.buffers.back();
      list.buffers.pop_back();
      g_counters.bytes_cached -= m * sizeof(float);
      return p;
    }
  }
  ++g_counters.fresh;
  void* p = std::aligned_alloc(kAlign, m * sizeof(float));
  if (!p) throw std::bad_alloc();
  return static_cast<float*>(p);
}

void release(float* p, size_t n) {
  if (!p) return;
  const size_t m = rounded(n ? n : 1);
  g_counters.bytes_in_use -= m * sizeof(float);
  ThreadCache* c = cache();
  if (c && g_counters.bytes_cached + m * sizeof(float) <= max_cached_bytes()) {
    c->free_lists[m].buffers.push_back(p);
    g_counters.bytes_cached += m * sizeof(float);
    return;
  }
  std::free(p);
}

void end_step() {
  ThreadCache* c = cache();
  if (!c) return;
  for (auto& [size, list] : c->free_lists) {
    if (!list.asked) list.free_all(size);
    list.asked_by_step = list.asked;
    list.asked = false;
  }
}

void keep_step_sizes() {
  ThreadCache* c = cache();
  if (!c) return;
  for (auto& [size, list] : c->free_lists)
    if (!list.asked_by_step) list.free_all(size);
}

Stats stats() {
  return {g_counters.requests.load(), g_counters.fresh.load(), g_counters.bytes_cached.load(),
          g_counters.bytes_in_use.load(), g_counters.bytes_in_use_peak.load()};
}

void reset_peak() { g_counters.bytes_in_use_peak = g_counters.bytes_in_use.load(); }

}  // namespace folio::pool
