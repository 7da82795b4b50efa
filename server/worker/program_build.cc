#include "server/worker/program_build.h"

#include <optional>
#include <span>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/code_cache.h"
#include "core/kernel_lowering.h"
#include "spdlog/spdlog.h"

namespace kad::server::worker {

std::string program_binary_key(const DeviceInfo& device, const std::string& variant,
                               const CompileRequest& request) {
  return absl::StrCat("program binary\n", device.platform, "\n", device.name, "\n",
                      variant.empty() ? "" : absl::StrCat(variant, "\n"), request.key.canonical());
}

absl::StatusOr<wire::Compile> compile_message(Device& lowering, const CompileRequest& request) {
  absl::StatusOr<std::vector<LoweredCode>> lowered = lowering.lower_ahead(request);
  if (!lowered.ok()) return lowered.status();
  wire::Compile message = to_message(request);
  for (LoweredCode& code : *lowered) {
    wire::LoweredCode* out = message.add_lowered();
    out->set_key(std::move(code.key));
    out->set_code(std::move(code.code));
  }
  return message;
}

std::optional<wire::CompileReply> cached_build(const std::string& key) {
  std::optional<std::string> stored = KernelLowering::shared().cache().load(key);
  if (!stored) return std::nullopt;
  wire::CompileReply reply;
  if (!reply.ParseFromString(*stored) || reply.code() != 0 || reply.program_binary().empty())
    return std::nullopt;
  return reply;
}

absl::StatusOr<wire::CompileReply> build_program(WorkerPool& pool, const DeviceInfo& device,
                                                 const std::string& key, Op op,
                                                 const std::string& entry,
                                                 const std::string& message,
                                                 StoppableBuild* stoppable) {
  if (std::optional<wire::CompileReply> cached = cached_build(key)) return *std::move(cached);
  absl::StatusOr<std::unique_ptr<WorkerProcess>> worker = pool.start_compile_worker(device.id);
  if (!worker.ok()) return worker.status();
  WorkerProcess& w = **worker;
  if (stoppable != nullptr && !stoppable->started(w.pid())) {
    w.stop();
    return absl::CancelledError("kad is stopping");
  }
  const IdRecord r{1};  // its only kernel
  const absl::Time deadline = absl::Now() + pool.options().compile_timeout;
  absl::Status transport =
      w.send(op, bytes_of(r), std::as_bytes(std::span<const char>(message.data(), message.size())));
  Header header;
  std::span<const std::byte> payload;
  if (transport.ok()) {
    transport = w.reader().next(&header, &payload, nullptr, deadline, kMaxCompileReplyBytes);
  }
  if (transport.ok() && header.op != static_cast<uint32_t>(Op::kCompileReply)) {
    transport = absl::InternalError(absl::StrFormat(
        "the worker answered a compile with message %d of %d bytes", header.op, header.size));
  }
  wire::CompileReply reply;
  if (transport.ok() && !reply.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    transport = absl::InternalError("the worker's compile reply does not parse");
  }
  const pid_t pid = w.pid();
  if (stoppable != nullptr) stoppable->ended();
  if (!transport.ok()) {
    if (stoppable != nullptr && stoppable->stopped()) {
      w.stop();
      return absl::CancelledError(
          absl::StrFormat("kad stopped while compiling kernel `%s` on %s", entry, device.id));
    }
    if (transport.code() == absl::StatusCode::kDeadlineExceeded) {
      // Stopped by kad, not ended by the client's code: counted as a
      // deadline, and killed at once rather than given time to end.
      w.stop();
      pool.note_lost(/*deadline=*/true);
      return absl::DeadlineExceededError(absl::StrFormat(
          "compiling kernel `%s` on %s took longer than %s: kad stopped its compile worker (pid "
          "%d)",
          entry, device.id, absl::FormatDuration(pool.options().compile_timeout), pid));
    }
    const std::string ended = w.reap();
    pool.note_lost(/*deadline=*/false);
    spdlog::warn("a compile worker (pid {}) on {} {} compiling kernel `{}` ({})", pid, device.id,
                 ended, entry, std::string(transport.message()));
    return absl::AbortedError(
        absl::StrFormat("compiling kernel `%s` on %s ended its compile worker (pid %d), %s: %s",
                        entry, device.id, pid, ended, transport.message()));
  }
  // One compile per worker: the next one starts clean.
  w.stop();
  // Kept only once it checks out: a reply kad cannot use would otherwise
  // fail this key for good, across restarts.
  if (reply.code() == 0 && !reply.program_binary().empty() && from_reply(reply).ok()) {
    wire::CompileReply kept = reply;
    kept.clear_message();  // the log of a compile that worked
    KernelLowering::shared().cache().store(key, kept.SerializeAsString());
  }
  return reply;
}

}  // namespace kad::server::worker
