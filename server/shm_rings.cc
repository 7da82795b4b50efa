#include "server/shm_rings.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <optional>

#include "absl/strings/str_format.h"
#include "kad/shm/v1/ring.h"

namespace kad::server {

using namespace shm::v1;

// peek and post copy a record's fields around its arrays: these say that
// no field sits where they do not look.
static_assert(offsetof(SubmitRecord, event) ==
                  offsetof(SubmitRecord, args) + sizeof(ArgRecord) * kMaxArgs,
              "peek copies the fields before `args`, then from `event` on");
static_assert(offsetof(CompletionRecord, message) + kMaxMessage == sizeof(CompletionRecord),
              "post copies the fields before `message`, which ends the record");

void ChannelRings::format(void* memory) {
  ChannelHeader& h = *new (memory) ChannelHeader();
  h.magic = kMagic;
  h.version = kVersion;
  h.submit_slots = kSubmitSlots;
  h.completion_slots = kCompletionSlots;
  h.arena_bytes = kArenaBytes;
  h.submit_offset = kSubmitOffset;
  h.completion_offset = kCompletionOffset;
  h.arena_offset = kArenaOffset;
  h.total_bytes = kChannelBytes;
}

absl::StatusOr<uint32_t> ChannelRings::wait_for_records(int64_t timeout_ns, bool spin) {
  RingIndices& ring = header_->submit;
  const uint32_t head = at_.submit_head;
  const uint32_t tail = wait_for_change(&ring.tail, head, &ring.consumer_waiting, timeout_ns, spin);
  return count_records(head, tail);
}

absl::StatusOr<uint32_t> ChannelRings::records_waiting() const {
  return count_records(at_.submit_head, header_->submit.tail.load(std::memory_order_acquire));
}

absl::StatusOr<uint32_t> ChannelRings::count_records(uint32_t head, uint32_t tail) {
  if (tail - head > kSubmitSlots) {
    return absl::OutOfRangeError(
        absl::StrFormat("submission ring indices out of range (head %d, tail %d)", head, tail));
  }
  return tail - head;
}

void ChannelRings::peek(SubmitRecord* out) const {
  const auto* slots = reinterpret_cast<const SubmitRecord*>(memory_ + kSubmitOffset);
  const SubmitRecord& slot = slots[at_.submit_head % kSubmitSlots];
  // A launch of a few arguments uses 200 of the record's 1700 bytes: copied
  // whole, every record cost a copy of some 24 cache lines the client never
  // wrote. `nargs` is the copy's, whatever the client writes meanwhile.
  std::memcpy(out, &slot, offsetof(SubmitRecord, args));
  const uint32_t nargs = std::min(out->nargs, kMaxArgs);
  std::memcpy(out->args, slot.args, nargs * sizeof(ArgRecord));
  std::memcpy(&out->event, &slot.event, sizeof(SubmitRecord) - offsetof(SubmitRecord, event));
}

void ChannelRings::consume() {
  RingIndices& ring = header_->submit;
  ++at_.submit_head;
  ring.head.store(at_.submit_head, std::memory_order_release);
  // A client waiting for room wants a quarter of the ring, not this one slot.
  notify_producer(&ring.head, &ring.producer_waiting, &ring.producer_wake_at);
}

absl::Status ChannelRings::post(const CompletionRecord& done, absl::Duration stall_timeout,
                                bool spin, absl::FunctionRef<bool()> give_up) {
  RingIndices& ring = header_->completion;
  // Our own count, not the shared word the client could rewrite.
  const uint32_t tail = at_.completion_tail;
  // Only once the ring is full: a clock read per answer showed in the
  // profile of a worker answering synchronous launches.
  std::optional<absl::Time> deadline;
  for (;;) {
    if (tail - completion_head_seen_ >= kCompletionSlots)
      completion_head_seen_ = ring.head.load(std::memory_order_acquire);
    const uint32_t head = completion_head_seen_;
    const uint32_t used = tail - head;
    if (used > kCompletionSlots) {
      return absl::OutOfRangeError(
          absl::StrFormat("completion ring indices out of range (head %d, tail %d)", head, tail));
    }
    if (used < kCompletionSlots) break;
    if (give_up()) return absl::CancelledError("the channel stops");
    if (!deadline) deadline = absl::Now() + stall_timeout;
    if (absl::Now() > *deadline) {
      return absl::DeadlineExceededError(
          absl::StrFormat("the client read no completion for %d ms with the ring full",
                          absl::ToInt64Milliseconds(stall_timeout)));
    }
    wait_for_change(&ring.head, head, &ring.producer_waiting, 50'000'000, spin);
  }
  auto* slots = reinterpret_cast<CompletionRecord*>(memory_ + kCompletionOffset);
  // The slot's message past `message_length` is left as it was (an earlier
  // answer to this client's channel): the client reads what the length says.
  std::memcpy(
      &slots[tail % kCompletionSlots], &done,
      offsetof(CompletionRecord, message) + std::min<size_t>(done.message_length, kMaxMessage));
  at_.completion_tail = tail + 1;
  ring.tail.store(at_.completion_tail, std::memory_order_release);
  notify(&ring.tail, &ring.consumer_waiting);
  return absl::OkStatus();
}

bool ChannelRings::completion_room() const {
  if (at_.completion_tail - completion_head_seen_ < kCompletionSlots) return true;
  completion_head_seen_ = header_->completion.head.load(std::memory_order_acquire);
  return at_.completion_tail - completion_head_seen_ < kCompletionSlots;
}

void ChannelRings::end(std::string_view reason) {
  const size_t n = std::min(reason.size(), sizeof(header_->close_reason));
  std::memcpy(header_->close_reason, reason.data(), n);
  header_->close_reason_length = static_cast<uint32_t>(n);
  header_->closed.store(1, std::memory_order_release);
  // Wake a client asleep on either ring.
  futex_wake(&header_->completion.tail);
  futex_wake(&header_->submit.head);
}

void ChannelRings::set_sleep_at_once(bool sleep) {
  // The client reads that line at every wait: written only when it changes.
  if (sleep == sleep_at_once_) return;
  sleep_at_once_ = sleep;
  header_->sleep_at_once.store(sleep ? 1 : 0, std::memory_order_relaxed);
}

CompletionRecord& CompletionBuilder::start(uint64_t tag) {
  std::memset(&done_, 0, offsetof(CompletionRecord, message));
  done_.tag = tag;
  return done_;
}

void CompletionBuilder::finish(const absl::Status& status) {
  done_.code = static_cast<int32_t>(status.code());
  size_t n = 0;
  if (!status.ok()) {
    n = std::min(status.message().size(), kMaxMessage);
    std::memcpy(done_.message, status.message().data(), n);
  }
  done_.message_length = static_cast<uint32_t>(n);
  if (message_in_done_ || n > 0) std::memset(done_.message + n, 0, kMaxMessage - n);
  message_in_done_ = n > 0;
}

}  // namespace kad::server
