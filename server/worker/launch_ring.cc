#include "server/worker/launch_ring.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "kad/shm/v1/ring.h"
#include "server/sealed_memfd.h"

namespace kad::server::worker {

// A fresh memfd is zeros: an empty ring.
absl::StatusOr<std::unique_ptr<LaunchRing>> LaunchRing::create() {
  absl::StatusOr<SharedMapping> m = SharedMapping::create("kad-launch-ring", kBytes);
  if (!m.ok()) return m.status();
  return std::unique_ptr<LaunchRing>(new LaunchRing(*std::move(m)));
}

absl::StatusOr<std::unique_ptr<LaunchRing>> LaunchRing::map(int fd) {
  absl::StatusOr<SharedMapping> m = SharedMapping::map(fd, kBytes, "a worker's launch ring");
  if (!m.ok()) return m.status();
  return std::unique_ptr<LaunchRing>(new LaunchRing(*std::move(m)));
}

absl::StatusOr<bool> LaunchRing::try_write(std::span<const std::byte> record) {
  LaunchRingHeader& h = header();
  const uint64_t taken = h.taken.load(std::memory_order_acquire);
  const uint64_t by_socket = h.socket_launches_taken.load(std::memory_order_acquire);
  if (taken > written_ || written_ - taken > kSlots || by_socket > socket_launches_) {
    return absl::InternalError(absl::StrFormat(
        "the worker's launch ring says %d of %d launches taken (%d of %d by its socket)", taken,
        written_, by_socket, socket_launches_));
  }
  if (by_socket != socket_launches_ || written_ - taken == kSlots ||
      record.size() > kSlotBytes - sizeof(uint64_t))
    return false;
  std::byte* s = slot(written_);
  const uint64_t size = record.size();
  std::memcpy(s, &size, sizeof size);
  std::memcpy(s + sizeof size, record.data(), record.size());
  h.written.store(++written_, std::memory_order_release);
  return true;
}

void LaunchRing::wake() {
  LaunchRingHeader& h = header();
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (h.sleeping.load(std::memory_order_seq_cst) != 0) {
    h.wakes.fetch_add(1, std::memory_order_seq_cst);
    shm::v1::futex_wake(&h.wakes);
  }
}

std::span<const std::byte> LaunchRing::next() const {
  const LaunchRingHeader& h = header();
  const std::byte* s = slot(h.taken.load(std::memory_order_relaxed));
  uint64_t size;
  std::memcpy(&size, s, sizeof size);
  // kad wrote it: bounded all the same, a size past the slot is a launch of none.
  if (size > kSlotBytes - sizeof size) size = 0;
  return {s + sizeof size, size};
}

void LaunchRing::take() {
  LaunchRingHeader& h = header();
  h.taken.store(h.taken.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void LaunchRing::note_socket_launch_taken() {
  LaunchRingHeader& h = header();
  h.socket_launches_taken.store(h.socket_launches_taken.load(std::memory_order_relaxed) + 1,
                                std::memory_order_release);
}

void LaunchRing::note_message_read() {
  LaunchRingHeader& h = header();
  h.messages_read.store(h.messages_read.load(std::memory_order_relaxed) + 1,
                        std::memory_order_release);
}

void LaunchRing::want_wide(uint64_t kernel) {
  LaunchRingHeader& h = header();
  const uint64_t n = h.wide_wants.load(std::memory_order_relaxed);
  h.wide_wanted[n % LaunchRingHeader::kWideWants].store(kernel, std::memory_order_relaxed);
  h.wide_wants.store(n + 1, std::memory_order_release);
}

absl::Status LaunchRing::check_messages_read() const {
  const uint64_t read = header().messages_read.load(std::memory_order_acquire);
  if (read == messages_sent_) return absl::OkStatus();
  return absl::InternalError(
      absl::StrFormat("the worker's launch ring says it read %d socket messages; kad sent %d", read,
                      messages_sent_));
}

void LaunchRing::sleep_on_word(uint32_t seen, absl::Duration timeout,
                               std::span<const AlsoWake> also) {
  if (also.empty()) {
    shm::v1::futex_wait(&header().wakes, seen, absl::ToInt64Nanoseconds(timeout));
    return;
  }
  // Several words at once (Linux 5.16's futex_waitv); shared futexes, as
  // the other sides are other processes.
  std::array<futex_waitv, 1 + kMaxAlsoWake> waiters{};
  const size_t n = 1 + std::min(also.size(), kMaxAlsoWake);
  waiters[0] = {seen, reinterpret_cast<uintptr_t>(&header().wakes), FUTEX_32, 0};
  for (size_t i = 1; i < n; ++i)
    waiters[i] = {also[i - 1].seen, reinterpret_cast<uintptr_t>(also[i - 1].word), FUTEX_32, 0};
  timespec until{};
  clock_gettime(CLOCK_MONOTONIC, &until);
  const int64_t ns = until.tv_nsec + absl::ToInt64Nanoseconds(timeout);
  until.tv_sec += ns / 1'000'000'000;
  until.tv_nsec = ns % 1'000'000'000;
  if (syscall(SYS_futex_waitv, waiters.data(), n, 0, &until, CLOCK_MONOTONIC) == -1 &&
      errno == ENOSYS) {
    // An older kernel: the ring's word alone, and a look at the others
    // every millisecond.
    shm::v1::futex_wait(&header().wakes, seen,
                        std::min<int64_t>(absl::ToInt64Nanoseconds(timeout), 1'000'000));
  }
}

}  // namespace kad::server::worker
