#include "autograd/pool.h"

#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace folio::pool {
namespace {

constexpr size_t kAlign = 64;
// Beyond this much cached memory, released buffers are freed instead. Half the
// machine's memory: a training step's whole working set stays cached (re-faulting
// fresh pages costs ~10 us per 4 KiB), while odd shapes cannot hoard all of it.
uint64_t max_cached_bytes() {
  static const uint64_t cap = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) / 2 : uint64_t(4) << 30;
  }();
  return cap;
}

struct Cache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<float*>> free_lists;  // rounded size -> buffers
  Stats stats;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: tensors may outlive static destruction
  return *c;
}

size_t rounded(size_t n) { return (n + 15) & ~size_t(15); }  // whole 64-byte lines

}  // namespace

float* acquire(size_t n) {
  const size_t m = rounded(n ? n : 1);
  Cache& c = cache();
  {
    std::lock_guard lock(c.mu);
    ++c.stats.requests;
    c.stats.bytes_in_use += m * sizeof(float);
    auto it = c.free_lists.find(m);
    if (it != c.free_lists.end() && !it->second.empty()) {
      float* p = it->second.back();
      it->second.pop_back();
      c.stats.bytes_cached -= m * sizeof(float);
      return p;
    }
    ++c.stats.fresh;
  }
  void* p = std::aligned_alloc(kAlign, m * sizeof(float));
  if (!p) throw std::bad_alloc();
  return static_cast<float*>(p);
}

void release(float* p, size_t n) {
  if (!p) return;
  const size_t m = rounded(n ? n : 1);
  Cache& c = cache();
  {
    std::lock_guard lock(c.mu);
    c.stats.bytes_in_use -= m * sizeof(float);
    if (c.stats.bytes_cached + m * sizeof(float) <= max_cached_bytes()) {
      c.free_lists[m].push_back(p);
      c.stats.bytes_cached += m * sizeof(float);
      return;
    }
  }
  std::free(p);
}

void trim() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  for (auto& [size, list] : c.free_lists)
    for (float* p : list) std::free(p);
  c.free_lists.clear();
  c.stats.bytes_cached = 0;
}

Stats stats() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  return c.stats;
}

}  // namespace folio::pool
