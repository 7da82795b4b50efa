// The daemon <-> worker protocol (DESIGN §8). A worker runs client kernels
// for the daemon on one device; they talk over one end of a UNIX stream
// socketpair each. Every message is a Header and `size` bytes of payload;
// memory travels as file descriptors (SCM_RIGHTS), never as bytes.
//
// The daemon sends requests; the worker answers those that need an answer
// (kHello's, kCompile, kCompileWide, kLoadKernel, kLoadWide, kImportBuffer,
// kCreateQueue, kWait, kLaunchRing), in order, and nothing else. Launches come through the
// launch ring (launch_ring.h) once it is attached, by the socket when the
// ring is full. Launches, frees and queue releases are not
// answered. Each queue's launches are reported as they end on the queue's
// progress page (queue_progress.h, sent with kCreateQueue), where the daemon
// waits; kWait only asks which launch failed, once the page says one did.
//
// The worker trusts the daemon (its parent, same build). The daemon trusts
// nothing a worker sends: sizes are bounded, and a malformed or missing
// reply ends the worker.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/kernel.h"
#include "core/launch_context.h"
#include "core/launch_geometry.h"
#include "kad/shm/v1/layout.h"

namespace kad::server::worker {

enum class Op : uint32_t {
  kHello = 1,     // worker -> daemon, once, when its device is ready (HelloRecord)
  kCompile,       // IdRecord + worker.v1.Compile -> worker.v1.CompileReply
  kLoadKernel,    // the same, for a kernel another worker compiled -> Status
  kImportBuffer,  // ImportRecord + the memory's fd -> Status
  kFreeBuffer,    // IdRecord
  kCreateQueue,   // IdRecord + the queue's progress page (memfd) -> Status
  kReleaseQueue,  // IdRecord
  kLaunch,        // LaunchRecord (only its first `nargs` arguments)
  kWait,          // WaitRecord -> Status: the first failure up to the event
  kStatus,        // worker -> daemon: StatusRecord + message
  kCompileReply,  // worker -> daemon: worker.v1.CompileReply
  kLaunchRing,    // IdRecord + the launch ring's memfd (launch_ring.h) -> Status
  // A compile worker: kCompile's request, built for the wide device beside
  // its own (launch_executor.h) -> worker.v1.CompileReply.
  kCompileWide,
  // IdRecord + a kernel's program binary for the wide device, which a
  // compile worker built (empty: there is none; it stays narrow) -> Status.
  kLoadWide,
  // ServeChannelRecord + a client's shared-memory channel (its memfd) ->
  // Status: the worker serves that channel's records itself until it hands
  // it back (direct_loan.h).
  kServeChannel,
};

struct Header {
  uint32_t op = 0;
  uint32_t reserved = 0;
  uint64_t size = 0;  // payload bytes after the header
};

struct HelloRecord {
  int32_t pid = 0;
  int32_t code = 0;    // absl::StatusCode: not OK when the worker cannot serve; a message follows
  uint32_t walls = 0;  // WallBits (worker_confinement.h): what confines it
  int32_t landlock_abi = 0;
};

struct IdRecord {
  uint64_t id = 0;
};

struct ImportRecord {
  uint64_t buffer = 0;
  uint64_t bytes = 0;
};

// One argument of a launch: a buffer by its worker id, a scalar's bits, or
// a local memory size.
struct ArgRecord {
  uint8_t kind = 0;    // kad::ArgKind
  uint8_t scalar = 0;  // kad::ScalarType
  uint8_t pad[6] = {};
  uint64_t value = 0;  // buffer id or scalar bits
  uint64_t local_bytes = 0;
};

struct LaunchRecord {
  uint64_t queue = 0;
  uint64_t kernel = 0;
  LaunchGeometry geometry;
  LaunchContext context;
  uint32_t nargs = 0;
  uint32_t pad = 0;
  ArgRecord args[kMaxKernelArgs];

  // The bytes that travel: the arguments past `nargs` do not.
  size_t wire_size() const { return offsetof(LaunchRecord, args) + nargs * sizeof(ArgRecord); }
};

// What the worker may answer on a lent channel without kad (direct_loan.h):
// a kRun record like `key` in all but its tag and its scalars' values,
// which it runs as `launch` with those values.
struct DirectPlan {
  shm::v1::SubmitRecord key{};
  LaunchRecord launch;
  // The completion's account of the launch (its choice), as kad gave it.
  uint8_t linear = 0, index_bits = 0, rank = 0, workgroup_rank = 0;
  int64_t workgroup[shm::v1::kMaxRank] = {};
  // The size of the buffer each buffer argument names, as kad knows it:
  // copies to and from those buffers are the worker's to serve too.
  uint64_t buffer_bytes[shm::v1::kMaxArgs] = {};
};

struct ServeChannelRecord {
  uint64_t queue = 0;       // the worker's queue the channel's records go to
  uint64_t event_base = 0;  // the client's event of the queue's launch before the loan's first
  uint32_t submit_head = 0, completion_tail = 0;  // where kad left the rings
  DirectPlan plan;
};

// `event` counts the queue's launches in this worker, from 1.
struct WaitRecord {
  uint64_t queue = 0;
  uint64_t event = 0;
};

struct StatusRecord {
  int32_t code = 0;    // absl::StatusCode; a message of `size - sizeof(StatusRecord)` bytes follows
  uint32_t flags = 0;  // StatusFlags
};

// What a worker says of a request it served, beside its status.
enum StatusFlags : uint32_t {
  // A kLoadKernel that loaded the program binary it was given, rather than
  // compiling the kernel's source.
  kLoadedProgramBinary = 1,
};

// The most a worker may send in one message: a compile's log fits.
inline constexpr uint64_t kMaxReplyBytes = 8 << 20;
// The most a compile worker's reply may be: it carries the program binary.
inline constexpr uint64_t kMaxCompileReplyBytes = 64 << 20;

// One end of the socketpair. Sends never raise SIGPIPE; a peer that is gone
// is UNAVAILABLE.
class Connection {
 public:
  explicit Connection(int fd) : fd_(fd) {}
  int fd() const { return fd_; }

  // A worker reads its socket whenever kad sends (kad sends a request only
  // once the one before was answered; launches are small): one whose
  // socket stays full this long is taken to have stopped reading.
  static constexpr absl::Duration kSendTimeout = absl::Seconds(30);
  // Besides, a worker reads a message at least this fast (bytes/s), as slow
  // a machine as it may be: one that takes a byte now and then is a worker
  // that stopped reading, however long the message.
  static constexpr double kSlowestRead = 8.0 * (1 << 20);

  // Sends one message, with `pass_fd` attached when >= 0. DEADLINE_EXCEEDED
  // when the peer has not taken it all within `timeout` and a second for
  // each kSlowestRead bytes: a worker that stops reading, or reads a byte at
  // a time, cannot hold kad's sending thread (and the locks it holds) for good.
  absl::Status send(Op op, std::span<const std::byte> a, std::span<const std::byte> b = {},
                    int pass_fd = -1, absl::Duration timeout = kSendTimeout);
  // Receives what has arrived, at least one byte, waiting at most until
  // `deadline` (InfiniteFuture: no bound): DEADLINE_EXCEEDED when nothing
  // came, UNAVAILABLE when the peer closed. A descriptor that came with the
  // bytes goes to `*fd` (else it stays as it was).
  absl::Status receive_some(std::span<std::byte> out, size_t* got, int* fd, absl::Time deadline);

 private:
  absl::Status wait_readable(absl::Time deadline);
  int fd_;
};

// Reads messages through a buffer: one system call takes all that has
// arrived, however many messages that is (a pipeline of launches).
class MessageReader {
 public:
  explicit MessageReader(Connection& connection) : connection_(connection) {}
  ~MessageReader();

  // The next message; its payload stays valid until the next call. At most
  // `max_size` bytes of payload (INTERNAL past it: a peer that sends more is
  // broken). The descriptor sent with it, if any, goes to `*fd` (-1 if none);
  // the caller owns it.
  absl::Status next(Header* header, std::span<const std::byte>* payload, int* fd,
                    absl::Time deadline, uint64_t max_size);
  // Bytes received and not yet read (part of a message, or more).
  bool has_unread() const { return end_ != begin_; }

 private:
  absl::Status fill(size_t needed, absl::Time deadline);
  Connection& connection_;
  std::vector<std::byte> buffer_;
  size_t begin_ = 0, end_ = 0;  // the bytes received and not yet read
  uint64_t read_ = 0;           // stream offset of buffer_[begin_]
  // One descriptor at most is ever in flight. The kernel hands it over with
  // the bytes of the message it was sent with, and ends that read there: it
  // belongs to the message holding the read's last byte, at `fd_at_`.
  int pending_fd_ = -1;
  uint64_t fd_at_ = 0;
};

template <typename T>
std::span<const std::byte> bytes_of(const T& value) {
  return std::as_bytes(std::span<const T>(&value, 1));
}

template <typename T>
std::span<std::byte> writable_bytes_of(T& value) {
  return std::as_writable_bytes(std::span<T>(&value, 1));
}

}  // namespace kad::server::worker
