// The queue commands both transports carry — launch, wait, copy in, copy
// out, ping — in one decoded form, run by one dispatch. A gRPC Submit stream
// and a shared-memory channel differ only in how they decode a command and
// answer it; what a command does is written here once.
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "core/launch_request.h"
#include "server/decoded_launch.h"
#include "server/engine.h"

namespace kad::server {

struct QueueOp {
  // kRun: a launch, then a wait for it (one round trip for a synchronous launch).
  enum class Kind { kLaunch, kRun, kWait, kCopyIn, kCopyOut, kPing };
  Kind kind = Kind::kPing;
  const LaunchByHandle* launch = nullptr;  // kLaunch, kRun: decoded, handles unresolved
  EventId event = 0;                       // kWait: 0 waits for everything submitted
  uint64_t buffer = 0, offset = 0;         // kCopyIn, kCopyOut
  std::span<const std::byte> in;           // kCopyIn: the bytes to write
  std::span<std::byte> out;                // kCopyOut: where the bytes go
};

struct QueueOpResult {
  bool launched = false;  // kLaunch, kRun: the launch was accepted, and `launch` says how
  LaunchResult launch;
};

// Runs `op` on `queue` of `session`, which came `via` a transport (its
// copies are counted as that transport's). Allocates nothing on success. A
// kRun whose launch was accepted reports it in `result` even when its wait
// fails.
absl::Status run_queue_op(Engine& engine, Session& session, uint64_t queue, const QueueOp& op,
                          RequestCounters::Transport via, QueueOpResult* result);

}  // namespace kad::server
