#include "server/worker/queue_progress.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

#include "kad/shm/v1/ring.h"
#include "server/sealed_memfd.h"

namespace kad::server::worker {
namespace {

// Shared futexes (ring.h's, not FUTEX_PRIVATE_FLAG): the page is mapped by
// two processes. Every sleeper wakes: a queue may have several.
void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

absl::StatusOr<std::shared_ptr<ProgressPage>> ProgressPage::create() {
  absl::StatusOr<int> fd = create_sealed_memfd("kad-queue-progress", kProgressBytes);
  if (!fd.ok()) return fd.status();
  return map(*fd);
}

absl::StatusOr<std::shared_ptr<ProgressPage>> ProgressPage::map(int fd) {
  void* p = mmap(nullptr, kProgressBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return absl::ResourceExhaustedError("cannot map a queue's progress page");
  }
  // A fresh memfd is zeros: a valid QueueProgress with nothing reported.
  return std::shared_ptr<ProgressPage>(new ProgressPage(fd, static_cast<QueueProgress*>(p)));
}

ProgressPage::~ProgressPage() {
  munmap(progress_, kProgressBytes);
  close(fd_);
}

void ProgressPage::report(uint64_t completed) {
  // Reports may race (a driver's threads call back side by side): the
  // count only grows.
  uint64_t now = progress_->completed.load(std::memory_order_relaxed);
  while (now < completed &&
         !progress_->completed.compare_exchange_weak(now, completed, std::memory_order_release,
                                                     std::memory_order_relaxed)) {
  }
  if (now >= completed) return;
  progress_->changes.fetch_add(1, std::memory_order_seq_cst);
  if (progress_->waiters.load(std::memory_order_seq_cst) != 0) futex_wake_all(&progress_->changes);
}

void ProgressPage::report_failure() { progress_->failed.store(1, std::memory_order_release); }

void ProgressPage::wake_all() {
  progress_->changes.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(&progress_->changes);
}

void ProgressPage::sleep_while_unchanged(uint32_t seen, absl::Duration timeout) {
  progress_->waiters.fetch_add(1, std::memory_order_seq_cst);
  if (progress_->changes.load(std::memory_order_seq_cst) == seen)
    shm::v1::futex_wait(&progress_->changes, seen, absl::ToInt64Nanoseconds(timeout));
  progress_->waiters.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace kad::server::worker
