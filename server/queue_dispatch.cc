#include "server/queue_dispatch.h"

namespace kad::server {

absl::Status run_queue_op(Engine& engine, Session& session, uint64_t queue, const QueueOp& op,
                          RequestCounters::Transport via, QueueOpResult* result) {
  switch (op.kind) {
    case QueueOp::Kind::kLaunch:
    case QueueOp::Kind::kRun: {
      absl::StatusOr<LaunchResult> r = engine.launch(session, *op.launch);
      if (!r.ok()) return r.status();
      result->launched = true;
      result->launch = *r;
      // In order: the launch's event done means everything before it is too;
      // an empty launch (event 0) waits for everything before it.
      if (op.kind == QueueOp::Kind::kRun) return engine.wait(session, queue, r->event);
      return absl::OkStatus();
    }
    case QueueOp::Kind::kWait:
      return engine.wait(session, queue, op.event);
    case QueueOp::Kind::kCopyIn: {
      absl::Status s = engine.write_buffer(session, queue, op.buffer, op.offset, op.in);
      if (s.ok()) engine.requests().count_copied(via, /*to_device=*/true, op.in.size());
      return s;
    }
    case QueueOp::Kind::kCopyOut: {
      absl::Status s = engine.read_buffer(session, queue, op.buffer, op.offset, op.out);
      if (s.ok()) engine.requests().count_copied(via, /*to_device=*/false, op.out.size());
      return s;
    }
    case QueueOp::Kind::kPing:
      return absl::OkStatus();
  }
  return absl::InternalError("unknown queue operation");
}

}  // namespace kad::server
