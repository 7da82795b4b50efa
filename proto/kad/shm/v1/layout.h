// kad's shared-memory channel, version 2: the byte layout both sides map.
// Version 2 added Op::kSubmit; a client and a kad of different versions do
// not open a channel (the client then uses gRPC).
//
// A local client (UNIX socket) opens one channel per queue over the side
// socket `<socket path>.shm` (SOCK_SEQPACKET): it sends a Hello naming its
// session and queue, and receives a HelloReply and, as SCM_RIGHTS, the memfd
// of the channel. The memory holds a ChannelHeader, a submission ring of
// SubmitRecord slots (client -> kad), a completion ring of CompletionRecord
// slots (kad -> client), and a data arena for copies. Records are fixed-size
// and copied by value; everything the client writes is untrusted and checked
// by kad before use. A connection may instead send a MapBuffer request and
// receive the memfd of one of its session's zero-copy buffers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace kad::shm::v1 {

inline constexpr uint32_t kMagic = 0x3164616b;  // "kad1"
inline constexpr uint32_t kVersion = 2;
inline constexpr uint32_t kMaxRank = 8;
inline constexpr uint32_t kMaxArgs = 96;
inline constexpr uint32_t kSubmitSlots = 256;
inline constexpr uint32_t kCompletionSlots = 256;
inline constexpr uint64_t kArenaBytes = 4 << 20;
inline constexpr size_t kMaxMessage = 416;

// ---- records -----------------------------------------------------------------

// kPing is answered at once with no kad work: the channel's own round trip.
// kRun: a launch answered once it has completed (launch + wait, one round
// trip); its completion carries the launch's event and choice, and the
// launch's failure, else the wait's. kSubmit: a launch answered only when it
// fails (Queue::submit, pipelined): a completion per launch cost both sides a
// record and the client a read, and told it nothing it used.
enum class Op : uint32_t {
  kLaunch = 1,
  kWait = 2,
  kCopyIn = 3,
  kCopyOut = 4,
  kPing = 5,
  kRun = 6,
  kSubmit = 7,
};

enum class ArgKind : uint8_t { kBuffer = 1, kScalar = 2, kLocal = 3 };

struct ArgRecord {
  uint8_t kind;    // ArgKind
  uint8_t scalar;  // kad.v1.ScalarType numbering, for kScalar
  uint8_t reserved[6];
  uint64_t value;  // buffer handle, scalar bits or local bytes
};

enum SubmitFlags : uint32_t {
  kHasNdrange = 1,
  kHasOffsets = 2,
  kHasWorkgroup = 4,
};

struct SubmitRecord {
  uint32_t op;     // Op
  uint32_t flags;  // SubmitFlags
  uint64_t tag;    // echoed in the completion
  // kLaunch
  uint64_t kernel;
  uint32_t rank;
  uint32_t workgroup_rank;
  uint32_t nargs;
  uint32_t reserved;
  int64_t extents[kMaxRank];
  int64_t offsets[kMaxRank];
  int64_t workgroup[kMaxRank];
  ArgRecord args[kMaxArgs];
  // kWait: `event` (0: everything so far). kCopyIn / kCopyOut: the device
  // range and where the bytes are in the arena.
  uint64_t event;
  uint64_t buffer;
  uint64_t offset;
  uint64_t size;
  uint64_t arena_offset;
};

struct CompletionRecord {
  uint64_t tag;
  int32_t code;  // google.rpc.Code; 0 is OK
  uint32_t message_length;
  uint64_t event;
  uint8_t linear;
  uint8_t index_bits;
  uint8_t rank;
  uint8_t workgroup_rank;
  uint32_t reserved;
  int64_t workgroup[kMaxRank];
  char message[kMaxMessage];  // not NUL-terminated; message_length bytes
};

// ---- rings -------------------------------------------------------------------

// Single producer, single consumer. Indices only grow; slot = index % slots.
// `*_waiting` tell the other side that a futex wake is needed.
struct alignas(64) RingIndices {
  std::atomic<uint32_t> head;  // next to consume (consumer writes)
  uint32_t pad0[15];
  std::atomic<uint32_t> tail;  // next to produce (producer writes)
  uint32_t pad1[15];
  std::atomic<uint32_t> consumer_waiting;  // consumer sleeps on `tail`
  std::atomic<uint32_t> producer_waiting;  // producer sleeps on `head`
  // Where a sleeping producer wants to be woken: once `head` reaches it
  // (0, and kads before it: at every change of `head`). A producer that
  // found the ring full waits for a quarter of it, not one slot: a wake-up
  // per record consumed cost the consumer a system call each, and a
  // spinning producer took a core from the consumer it waited for. The
  // consumer lowers producer_waiting when it wakes the producer, once.
  std::atomic<uint32_t> producer_wake_at;
  uint32_t pad2[13];
};

struct ChannelHeader {
  uint32_t magic;
  uint32_t version;
  uint32_t submit_slots;
  uint32_t completion_slots;
  uint64_t arena_bytes;
  uint64_t submit_offset;
  uint64_t completion_offset;
  uint64_t arena_offset;
  uint64_t total_bytes;
  // Set (1) by kad while more of its channels are busy than the machine's
  // cores can spin for: both sides then sleep on the futex at once instead of
  // spinning first, so that busy clients share the cores evenly. Spinning
  // pairs (a client and kad's channel thread) took the cores in turns: on 2
  // cores, 4 synchronous clients got a Jain index of 0.51-0.80 spinning and
  // 0.995 sleeping, and more launches in all. 0 (and older kads): spin first.
  std::atomic<uint32_t> sleep_at_once;
  uint32_t reserved32;
  uint64_t reserved[8];
  RingIndices submit;
  RingIndices completion;
  std::atomic<uint32_t> closed;  // set by kad when it ends the channel (then futexes woken)
  uint32_t close_reason_length;
  char close_reason[256];  // why kad ended the channel
};

static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(sizeof(SubmitRecord) <= 2048);
static_assert(sizeof(CompletionRecord) == 512);

inline constexpr uint64_t kSubmitOffset = 4096;
inline constexpr uint64_t kCompletionOffset =
    kSubmitOffset + uint64_t{kSubmitSlots} * sizeof(SubmitRecord);
inline constexpr uint64_t kArenaOffset =
    (kCompletionOffset + uint64_t{kCompletionSlots} * sizeof(CompletionRecord) + 4095) / 4096 *
    4096;
inline constexpr uint64_t kChannelBytes = kArenaOffset + kArenaBytes;
static_assert(sizeof(ChannelHeader) <= kSubmitOffset);
static_assert(offsetof(ChannelHeader, submit) == 128, "v1's rings stay where they were");

// ---- the side socket -----------------------------------------------------------

enum class Request : uint32_t { kHello = 1, kMapBuffer = 2 };

struct Hello {
  uint32_t request;  // kHello
  uint32_t version;
  char session_id[64];  // NUL-padded
  uint64_t queue;
};

// Asks for the memfd of a zero-copy buffer (allocated on a host-visible
// device); answered with a Reply and the fd, then the connection closes.
struct MapBuffer {
  uint32_t request;  // kMapBuffer
  uint32_t version;
  char session_id[64];  // NUL-padded
  uint64_t buffer;
};

struct Reply {
  int32_t code;  // google.rpc.Code; 0: an fd comes with this reply
  uint32_t message_length;
  uint64_t bytes;  // the size of the memory behind the fd
  char message[240];
};

}  // namespace kad::shm::v1
