#include "server/queue_dispatch.h"

namespace kad::server {

absl::Status run_queue_op(Engine& engine, Session& session, uint64_t queue, const QueueOp& op,
                          LaunchResult* launched) {
  switch (op.kind) {
    case QueueOp::Kind::kLaunch: {
      absl::StatusOr<LaunchResult> r = engine.launch(session, *op.launch);
      if (!r.ok()) return r.status();
      *launched = *r;
      return absl::OkStatus();
    }
    case QueueOp::Kind::kWait:
      return engine.wait(session, queue, op.event);
    case QueueOp::Kind::kCopyIn:
      return engine.write_buffer(session, queue, op.buffer, op.offset, op.in);
    case QueueOp::Kind::kCopyOut:
      return engine.read_buffer(session, queue, op.buffer, op.offset, op.out);
    case QueueOp::Kind::kPing:
      return absl::OkStatus();
  }
  return absl::InternalError("unknown queue operation");
}

}  // namespace kad::server
