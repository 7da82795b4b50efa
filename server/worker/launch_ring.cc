#include "server/worker/launch_ring.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_format.h"
#include "kad/shm/v1/ring.h"
#include "server/sealed_memfd.h"

namespace kad::server::worker {

absl::StatusOr<std::unique_ptr<LaunchRing>> LaunchRing::create() {
  absl::StatusOr<int> fd = create_sealed_memfd("kad-launch-ring", kBytes);
  if (!fd.ok()) return fd.status();
  return map(*fd);
}

absl::StatusOr<std::unique_ptr<LaunchRing>> LaunchRing::map(int fd) {
  void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return absl::ResourceExhaustedError("cannot map a worker's launch ring");
  }
  // A fresh memfd is zeros: an empty ring.
  return std::unique_ptr<LaunchRing>(new LaunchRing(fd, static_cast<std::byte*>(p)));
}

LaunchRing::~LaunchRing() {
  munmap(base_, kBytes);
  close(fd_);
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
  if (h.sleeping.load(std::memory_order_seq_cst) != 0) shm::v1::futex_wake(&h.sleeping);
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

absl::Status LaunchRing::check_messages_read() const {
  const uint64_t read = header().messages_read.load(std::memory_order_acquire);
  if (read == messages_sent_) return absl::OkStatus();
  return absl::InternalError(
      absl::StrFormat("the worker's launch ring says it read %d socket messages; kad sent %d", read,
                      messages_sent_));
}

void LaunchRing::sleep_on_word(absl::Duration timeout) {
  shm::v1::futex_wait(&header().sleeping, 1, absl::ToInt64Nanoseconds(timeout));
}

}  // namespace kad::server::worker
