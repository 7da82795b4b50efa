// The serving side of one shared-memory channel's rings (DESIGN §6): takes
// the client's submission records, each as a private copy, and posts
// completions for it to read. It knows no engine, no session and no device:
// kad's channel thread runs records on the engine through it, and the
// direct path (server/README.md) lets the session's worker serve the same
// rings while kad is out of the way. Whoever serves them owns the positions
// (positions()); a hand-over passes them on with the rings.
//
// Everything in the mapping is the client's to scribble on: the serving
// side keeps its own count of what it consumed and posted, reads each of
// the client's indices once per look, and ends the channel on one it cannot
// have reached.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kad/shm/v1/layout.h"

namespace kad::server {

// Where the serving side of a channel is: records taken, completions posted.
struct RingPositions {
  uint32_t submit_head = 0;
  uint32_t completion_tail = 0;
};

class ChannelRings {
 public:
  // Writes a new channel's header (sizes and offsets) into `memory`, which
  // is shm::v1::kChannelBytes of zeros.
  static void format(void* memory);

  // Serves the rings in `memory` (a channel's kChannelBytes, mapped) from
  // `at`; the mapping outlives this.
  explicit ChannelRings(void* memory, RingPositions at = {})
      : memory_(static_cast<uint8_t*>(memory)),
        header_(static_cast<shm::v1::ChannelHeader*>(memory)),
        at_(at),
        sleep_at_once_(header_->sleep_at_once.load(std::memory_order_relaxed) != 0) {}

  shm::v1::ChannelHeader& header() const { return *header_; }
  RingPositions positions() const { return at_; }
  std::byte* arena() const { return reinterpret_cast<std::byte*>(memory_ + shm::v1::kArenaOffset); }

  // Waits up to `timeout_ns` (spinning first when `spin`) for the client's
  // next records and says how many there are: 0 when none came. An error
  // (naming both indices) when the client's tail is more than a ring ahead:
  // the channel must end.
  absl::StatusOr<uint32_t> wait_for_records(int64_t timeout_ns, bool spin);
  // The same without waiting: how many records are there now.
  absl::StatusOr<uint32_t> records_waiting() const;
  // Copies the next record into `out` (the client may still write its slot)
  // and frees the slot. Only after wait_for_records counted it. Only the
  // bytes a record uses are copied: its fields, and the first `nargs`
  // arguments (at most kMaxArgs, as `out->nargs` says, which may then be
  // more); `out`'s arguments past those keep what they held.
  void take(shm::v1::SubmitRecord* out) {
    peek(out);
    consume();
  }
  // take() in two steps, for a server that may leave the record where it
  // is for another (the direct path hands it back to kad): the copy, then
  // the slot freed.
  void peek(shm::v1::SubmitRecord* out) const;
  void consume();

  // Posts `done` (its fields and the `message_length` bytes of its message
  // that are its own), waiting for room while the ring is full: spinning first
  // when `spin`, and asking `give_up()` every 50 ms. OK once posted;
  // CANCELLED when `give_up()` said so; otherwise the channel must end, for
  // the reason in the error: the client's head out of range, or a full ring
  // that the client left unread for `stall_timeout`.
  absl::Status post(const shm::v1::CompletionRecord& done, absl::Duration stall_timeout, bool spin,
                    absl::FunctionRef<bool()> give_up);

  // Whether a completion would be posted now, without a wait: the ring has
  // room, and the client's head is in range.
  bool completion_room() const;

  // Ends the channel: `reason` goes into the header (cut to its room), and
  // a client asleep on either ring wakes to read it.
  void end(std::string_view reason);
  // Tells the client whether to sleep at once rather than spin first
  // (ChannelHeader::sleep_at_once); written only when it changes.
  void set_sleep_at_once(bool sleep);

 private:
  static absl::StatusOr<uint32_t> count_records(uint32_t head, uint32_t tail);

  uint8_t* memory_;
  shm::v1::ChannelHeader* header_;
  RingPositions at_;
  // The client's completion head as last read (it may only have grown
  // since): read again only when this leaves no room, since each read is a
  // cache line from the client's core. "Full" until first read.
  mutable uint32_t completion_head_seen_ = at_.completion_tail - shm::v1::kCompletionSlots;
  bool sleep_at_once_ = false;
};

// Builds completions in place for one channel. A completion goes to the
// client whole, so no byte of it may be what the server's memory held
// before (another session's, say): the record starts zeroed, and past a
// message's length its bytes are zeros, not an earlier message's.
class CompletionBuilder {
 public:
  // Starts the completion of record `tag`: every field but the message
  // zeroed. The caller fills the launch's fields, then finish().
  shm::v1::CompletionRecord& start(uint64_t tag);
  // Sets the code and the message (cut to kMaxMessage).
  void finish(const absl::Status& status);
  const shm::v1::CompletionRecord& record() const { return done_; }

 private:
  shm::v1::CompletionRecord done_{};
  bool message_in_done_ = false;  // done_'s message bytes hold an earlier record's
};

}  // namespace kad::server
