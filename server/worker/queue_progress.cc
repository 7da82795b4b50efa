#include "server/worker/queue_progress.h"

#include <linux/futex.h>
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

// A fresh memfd is zeros: a valid QueueProgress with nothing reported.
absl::StatusOr<std::shared_ptr<ProgressPage>> ProgressPage::create() {
  absl::StatusOr<SharedMapping> m = SharedMapping::create("kad-queue-progress", kProgressBytes);
  if (!m.ok()) return m.status();
  return std::shared_ptr<ProgressPage>(new ProgressPage(*std::move(m)));
}

absl::StatusOr<std::shared_ptr<ProgressPage>> ProgressPage::map(int fd) {
  absl::StatusOr<SharedMapping> m =
      SharedMapping::map(fd, kProgressBytes, "a queue's progress page");
  if (!m.ok()) return m.status();
  return std::shared_ptr<ProgressPage>(new ProgressPage(*std::move(m)));
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
