// Launches from the daemon to a session's worker through shared memory
// (DESIGN §8). A launch used to be one message on the worker's socket: a
// sendmsg in kad and a wake-up and recvmsg in the worker, per launch (a
// tenth of the machine's CPU for a pipeline of launches through a worker).
// Now kad writes each launch into this ring and wakes the worker only when
// it sleeps; a worker that is busy takes the next launches without a system
// call on either side.
//
// Order with the socket's messages: the worker takes every launch written
// so far before it serves a socket message, and kad writes a launch before
// it sends anything that depends on it, so a free or a wait never passes a
// launch sent before it. A launch the ring has no room for goes over the
// socket; until the worker has taken that one, later launches follow it
// there (`socket_launches_taken`), so that none passes it.
//
// The worker is untrusted: kad reads `taken`, `socket_launches_taken` and
// `messages_read` from the page, each once, and a value it cannot have
// reached ends the worker (`sleeping` only decides whether kad wakes it).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/sealed_memfd.h"
#include "server/worker/worker_protocol.h"

namespace kad::server::worker {

struct LaunchRingHeader {
  alignas(64) std::atomic<uint64_t> written{0};    // kad: launches written, counted from 0
  alignas(64) std::atomic<uint64_t> taken{0};      // the worker: launches it took from the ring
  std::atomic<uint64_t> socket_launches_taken{0};  // the worker: those that came by the socket
  // The worker: socket messages it read since the ring was attached. When
  // kad reads an answer, the worker has read all kad sent before it, and
  // no more (kad sends nothing while it waits for an answer).
  std::atomic<uint64_t> messages_read{0};
  // kad: messages it sent on the socket since the ring was attached. The
  // worker reads its socket only when one is owed: no poll per launch.
  alignas(64) std::atomic<uint64_t> messages{0};
  // The worker: 1 while it may sleep; kad wakes it after writing a launch
  // or sending a message.
  alignas(64) std::atomic<uint32_t> sleeping{0};
  // kad: its wake-ups, counted; the worker sleeps on this word (a futex)
  // as it was before its last look. A wake-up that comes between that look
  // and the sleep has changed the word, so the sleep does not begin: with
  // an unchanging word, that wake-up was lost, and the launch waited for
  // the worker's periodic look (5 s).
  std::atomic<uint32_t> wakes{0};
  // The worker: kernels whose launches want the wide device and which it
  // has no build for (want_wide); kad has a compile worker build them, once
  // per key for every session (take_wide_wants). Entry n % kWideWants is
  // written before wide_wants counts it.
  static constexpr uint64_t kWideWants = 64;
  alignas(64) std::atomic<uint64_t> wide_wants{0};
  std::atomic<uint64_t> wide_wanted[kWideWants]{};
};

class LaunchRing {
 public:
  static constexpr uint64_t kSlots = 64;
  static constexpr size_t kSlotBytes = 4096;  // a launch with every argument, and its size
  static constexpr size_t kHeaderBytes = 4096;
  static constexpr size_t kBytes = kHeaderBytes + kSlots * kSlotBytes;
  static_assert(sizeof(LaunchRingHeader) <= kHeaderBytes);
  static_assert(sizeof(uint64_t) + sizeof(LaunchRecord) <= kSlotBytes);
  // The most words sleep() watches beside the ring's (a session's lent channels).
  static constexpr size_t kMaxAlsoWake = 8;

  // A new, zeroed, sealed ring (kad's side); fd() is what goes to the worker.
  static absl::StatusOr<std::unique_ptr<LaunchRing>> create();
  // The ring whose memfd came with kLaunchRing (the worker's side); owns `fd`.
  static absl::StatusOr<std::unique_ptr<LaunchRing>> map(int fd);
  LaunchRing(const LaunchRing&) = delete;
  LaunchRing& operator=(const LaunchRing&) = delete;
  int fd() const { return memory_.fd(); }

  // kad: writes `record` (one launch's wire bytes) if the ring has room and
  // no launch sent by the socket is still untaken. False: send it by the
  // socket (then note_socket_launch()). INTERNAL when the worker wrote
  // positions it cannot have reached: it is broken, or hostile.
  absl::StatusOr<bool> try_write(std::span<const std::byte> record);
  void note_socket_launch() { ++socket_launches_; }
  // kad, after sending a message on the socket.
  void note_message() { header().messages.store(++messages_sent_, std::memory_order_release); }
  // kad, having read an answer: INTERNAL unless the worker says it read
  // every message kad sent, and no more. A message sent past the count
  // would wait for the worker's periodic look at its socket.
  absl::Status check_messages_read() const;
  // kad, after writing a launch or sending a message: wakes the worker if
  // it sleeps.
  void wake();

  // The worker: whether a launch is written and not yet taken; next() is
  // its bytes, and take() then frees its slot.
  bool has_next() const {
    return header().written.load(std::memory_order_acquire) !=
           header().taken.load(std::memory_order_relaxed);
  }
  std::span<const std::byte> next() const;
  void take();
  void note_socket_launch_taken();
  void note_message_read();
  // The worker: asks kad for `kernel`'s build for the wide device; one
  // thread at a time (the caller's lock). kad looks at each launch it
  // writes, and each launch asks for one kernel at most: only a worker far
  // ahead of kad by more than kWideWants kernels loses the oldest.
  void want_wide(uint64_t kernel);
  // kad: calls `f(kernel)` for each kernel the worker asked a wide build for
  // since the last look (a worker that asks more often than kad looks loses
  // the oldest, which then stay on one core). Cheap when none.
  template <typename F>
  void take_wide_wants(F f);
  // The worker: whether kad has sent more messages than `read`.
  bool message_owed(uint64_t read) const {
    return header().messages.load(std::memory_order_acquire) > read;
  }
  // A word beside the ring whose change also ends the worker's sleep (a
  // lent channel's submission tail, which its client bumps and wakes).
  struct AlsoWake {
    std::atomic<uint32_t>* word = nullptr;
    uint32_t seen = 0;
  };
  // The worker: sleeps until kad wakes it, a word of `also` differs from
  // what it saw, or `timeout` passes, unless a launch is waiting or
  // `more_to_read()` says a message is owed.
  template <typename MoreToRead>
  void sleep(absl::Duration timeout, MoreToRead more_to_read, std::span<const AlsoWake> also = {});

 private:
  explicit LaunchRing(SharedMapping memory)
      : memory_(std::move(memory)), base_(static_cast<std::byte*>(memory_.data())) {}
  LaunchRingHeader& header() const { return *reinterpret_cast<LaunchRingHeader*>(base_); }
  std::byte* slot(uint64_t n) const { return base_ + kHeaderBytes + (n % kSlots) * kSlotBytes; }
  // Sleeps unless `wakes` has changed from `seen` (or a word of `also`).
  void sleep_on_word(uint32_t seen, absl::Duration timeout, std::span<const AlsoWake> also);

  SharedMapping memory_;
  std::byte* base_;
  uint64_t written_ = 0;          // kad's own count (the page's may be scribbled on)
  uint64_t socket_launches_ = 0;  // kad: launches it sent by the socket
  uint64_t messages_sent_ = 0;    // kad: messages it sent on the socket
  uint64_t wide_wants_seen_ = 0;  // kad: wide wants it took
};

template <typename F>
void LaunchRing::take_wide_wants(F f) {
  LaunchRingHeader& h = header();
  const uint64_t asked = h.wide_wants.load(std::memory_order_acquire);
  if (asked == wide_wants_seen_) return;
  // The worker's count, read once: a count that went back or leapt is
  // taken for what the ring can hold, never for more.
  uint64_t from = wide_wants_seen_;
  if (asked < from || asked - from > LaunchRingHeader::kWideWants)
    from = asked - std::min(asked, LaunchRingHeader::kWideWants);
  wide_wants_seen_ = asked;
  for (uint64_t n = from; n != asked; ++n)
    f(h.wide_wanted[n % LaunchRingHeader::kWideWants].load(std::memory_order_relaxed));
}

template <typename MoreToRead>
void LaunchRing::sleep(absl::Duration timeout, MoreToRead more_to_read,
                       std::span<const AlsoWake> also) {
  LaunchRingHeader& h = header();
  // Read before `sleeping` is set: a wake-up kad makes once it sees
  // `sleeping` changes `wakes` from this, and the sleep does not begin.
  const uint32_t wakes = h.wakes.load(std::memory_order_seq_cst);
  h.sleeping.store(1, std::memory_order_seq_cst);
  // After `sleeping` is set, kad's next write or message sees it and wakes
  // this worker; anything that came before is seen here (the fence pairs
  // with wake()'s: neither side's load passes its own store).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (h.written.load(std::memory_order_seq_cst) == h.taken.load(std::memory_order_relaxed) &&
      !more_to_read())
    sleep_on_word(wakes, timeout, also);
  h.sleeping.store(0, std::memory_order_relaxed);
}

}  // namespace kad::server::worker
