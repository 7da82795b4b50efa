#include "tests/support/alloc_counter.h"

#include <errno.h>
#include <stddef.h>

#include <atomic>

#include "core/driver_scope.h"

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);
}

namespace kad::testing {
namespace {

std::atomic<uint64_t> g_total_allocs{0};
std::atomic<uint64_t> g_total_bytes{0};
std::atomic<uint64_t> g_driver_allocs{0};
std::atomic<uint64_t> g_service_allocs{0};
thread_local uint64_t t_kad_allocs = 0;
thread_local uint64_t t_kad_bytes = 0;
thread_local uint64_t t_driver_allocs = 0;
thread_local uint64_t t_driver_bytes = 0;

void record(size_t bytes) {
  g_total_allocs.fetch_add(1, std::memory_order_relaxed);
  g_total_bytes.fetch_add(bytes, std::memory_order_relaxed);
  if (kad::in_driver_call()) {
    g_driver_allocs.fetch_add(1, std::memory_order_relaxed);
    ++t_driver_allocs;
    t_driver_bytes += bytes;
  } else {
    if (kad::t_kad_service_thread) g_service_allocs.fetch_add(1, std::memory_order_relaxed);
    ++t_kad_allocs;
    t_kad_bytes += bytes;
  }
}

AllocCounts now() {
  AllocCounts c;
  c.kad_allocs = t_kad_allocs;
  c.kad_bytes = t_kad_bytes;
  c.driver_allocs = t_driver_allocs;
  c.driver_bytes = t_driver_bytes;
  c.total_allocs = g_total_allocs.load(std::memory_order_relaxed);
  c.total_bytes = g_total_bytes.load(std::memory_order_relaxed);
  c.all_driver_allocs = g_driver_allocs.load(std::memory_order_relaxed);
  c.service_allocs = g_service_allocs.load(std::memory_order_relaxed);
  return c;
}

}  // namespace

AllocCounter::AllocCounter() : start_(now()) {}

AllocCounts AllocCounter::counts() const {
  AllocCounts c = now();
  c.kad_allocs -= start_.kad_allocs;
  c.kad_bytes -= start_.kad_bytes;
  c.driver_allocs -= start_.driver_allocs;
  c.driver_bytes -= start_.driver_bytes;
  c.total_allocs -= start_.total_allocs;
  c.total_bytes -= start_.total_bytes;
  c.all_driver_allocs -= start_.all_driver_allocs;
  c.service_allocs -= start_.service_allocs;
  return c;
}

}  // namespace kad::testing

// glibc lets a program replace its allocator by defining these; every library
// in the process (libstdc++'s operator new, the drivers) then calls them.
extern "C" {

void* malloc(size_t size) {
  kad::testing::record(size);
  return __libc_malloc(size);
}

void* calloc(size_t n, size_t size) {
  kad::testing::record(n * size);
  return __libc_calloc(n, size);
}

void* realloc(void* p, size_t size) {
  kad::testing::record(size);
  return __libc_realloc(p, size);
}

void free(void* p) { __libc_free(p); }

void* memalign(size_t alignment, size_t size) {
  kad::testing::record(size);
  return __libc_memalign(alignment, size);
}

void* aligned_alloc(size_t alignment, size_t size) {
  kad::testing::record(size);
  return __libc_memalign(alignment, size);
}

int posix_memalign(void** out, size_t alignment, size_t size) {
  kad::testing::record(size);
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

}  // extern "C"
