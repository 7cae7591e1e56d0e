#pragma once
// Include in exactly one file of a benchmark executable: defines the process-wide
// allocation counters g_heap_allocs and g_new_calls.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

// ---- allocation counting: interpose glibc's malloc family for the whole process
// (this executable's definitions win over libc's for every shared library), and
// replace operator new to count it separately. Not under AddressSanitizer, which
// owns malloc and operator new itself: there the two heap counters stay 0.

namespace {
std::atomic<uint64_t> g_heap_allocs{0};  // malloc, calloc, realloc, memalign, ...
std::atomic<uint64_t> g_new_calls{0};    // operator new, every form
[[maybe_unused]] inline void count_heap() {
  g_heap_allocs.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

#if defined(__SANITIZE_ADDRESS__)
#define FOLIO_BENCH_HEAP_HOOKS 0
#else
#define FOLIO_BENCH_HEAP_HOOKS 1

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);

void* malloc(size_t n) noexcept {
  count_heap();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) noexcept {
  count_heap();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) noexcept {
  count_heap();
  return __libc_realloc(p, n);
}
void free(void* p) noexcept { __libc_free(p); }
void* memalign(size_t align, size_t n) noexcept {
  count_heap();
  return __libc_memalign(align, n);
}
void* aligned_alloc(size_t align, size_t n) noexcept {
  count_heap();
  return __libc_memalign(align, n);
}
int posix_memalign(void** out, size_t align, size_t n) noexcept {
  if (align < sizeof(void*) || (align & (align - 1)) != 0) return 22;  // EINVAL
  count_heap();
  void* p = __libc_memalign(align, n);
  if (!p && n) return 12;  // ENOMEM
  *out = p;
  return 0;
}
}  // extern "C"

namespace {
void* counted_new(size_t n) {
  g_new_calls.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* counted_new(size_t n, std::align_val_t a) {
  g_new_calls.fetch_add(1, std::memory_order_relaxed);
  const size_t align = std::max(size_t(a), sizeof(void*));
  if (void* p = memalign(align, n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(size_t n) { return counted_new(n); }
void* operator new[](size_t n) { return counted_new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  g_new_calls.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  g_new_calls.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new(size_t n, std::align_val_t a) { return counted_new(n, a); }
void* operator new[](size_t n, std::align_val_t a) { return counted_new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }
#endif  // !__SANITIZE_ADDRESS__
