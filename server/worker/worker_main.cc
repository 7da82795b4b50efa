#include "server/worker/worker_main.h"

#include <linux/close_range.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "server/worker/worker_codec.h"
#include "server/worker/worker_protocol.h"

namespace kad::server::worker {
namespace {

// The daemon's memory, mapped here for the device to compute on.
struct ImportedBuffer {
  void* data = MAP_FAILED;
  uint64_t bytes = 0;
  std::unique_ptr<Buffer> buffer;  // released before the mapping goes
  ~ImportedBuffer() {
    buffer.reset();
    if (data != MAP_FAILED) munmap(data, bytes);
  }
};

// A queue's launches in this worker, numbered from 1 as the daemon counts
// them, and the driver's events for the newest of them.
struct WorkerQueueState {
  static constexpr uint64_t kRing = 4096;
  std::unique_ptr<Queue> queue;
  uint64_t launched = 0;
  std::array<EventId, kRing> events{};
  // The first launch the driver refused since the last wait, reported by the
  // next wait that covers it.
  absl::Status failed;
  uint64_t failed_at = 0;
};

class WorkerServer {
 public:
  WorkerServer(int fd, Device& device) : connection_(fd), device_(device) {}

  int run() {
    MessageReader reader(connection_);
    for (;;) {
      Header header;
      std::span<const std::byte> payload;
      int fd = -1;
      // The daemon hung up (or is gone): the worker's work is over.
      if (!reader.next(&header, &payload, &fd, absl::InfiniteFuture(), uint64_t{1} << 40).ok())
        return 0;
      if (absl::Status s = handle(static_cast<Op>(header.op), payload, fd); !s.ok()) {
        // The daemon sent what it never sends: give up rather than guess.
        std::fprintf(stderr, "kad worker: %s\n", std::string(s.message()).c_str());
        return 3;
      }
    }
  }

 private:
  template <typename T>
  static absl::Status read(std::span<const std::byte> payload, T* out, size_t min = sizeof(T)) {
    if (payload.size() < min || payload.size() > sizeof(T)) {
      return absl::InternalError(absl::StrFormat("a message of %d bytes", payload.size()));
    }
    *out = T{};
    std::memcpy(out, payload.data(), payload.size());
    return absl::OkStatus();
  }

  absl::Status reply(const absl::Status& status, uint32_t flags = 0) {
    StatusRecord r{static_cast<int32_t>(status.code()), flags};
    const absl::string_view m = status.message();
    return connection_.send(Op::kStatus, bytes_of(r),
                            std::as_bytes(std::span<const char>(m.data(), m.size())));
  }

  absl::Status handle(Op op, std::span<const std::byte> payload, int fd) {
    switch (op) {
      case Op::kLaunch: {
        // Only the bytes that came: the record (2.6 KB with every argument
        // slot) is not cleared per launch, so the size must match `nargs`.
        if (payload.size() < offsetof(LaunchRecord, args) || payload.size() > sizeof(LaunchRecord))
          return absl::InternalError(absl::StrFormat("a launch of %d bytes", payload.size()));
        std::memcpy(&launch_, payload.data(), payload.size());
        if (launch_.nargs > kMaxKernelArgs || launch_.wire_size() != payload.size()) {
          return absl::InternalError(absl::StrFormat("a launch of %d bytes for %d arguments",
                                                     payload.size(), launch_.nargs));
        }
        launch();
        return absl::OkStatus();
      }
      case Op::kWait: {
        WaitRecord w;
        if (absl::Status s = read(payload, &w); !s.ok()) return s;
        return reply(wait(w));
      }
      case Op::kCompile:
      case Op::kLoadKernel:
        return compile(op, payload);
      case Op::kImportBuffer: {
        ImportRecord r;
        if (absl::Status s = read(payload, &r); !s.ok()) return s;
        return reply(import(r, fd));
      }
      case Op::kFreeBuffer: {
        IdRecord r;
        if (absl::Status s = read(payload, &r); !s.ok()) return s;
        buffers_.erase(r.id);
        return absl::OkStatus();
      }
      case Op::kCreateQueue: {
        IdRecord r;
        if (absl::Status s = read(payload, &r); !s.ok()) return s;
        absl::StatusOr<std::unique_ptr<Queue>> q = device_.create_queue();
        if (q.ok()) {
          auto state = std::make_unique<WorkerQueueState>();
          state->queue = *std::move(q);
          queues_[r.id] = std::move(state);
        }
        return reply(q.status());
      }
      case Op::kReleaseQueue: {
        IdRecord r;
        if (absl::Status s = read(payload, &r); !s.ok()) return s;
        queues_.erase(r.id);
        return absl::OkStatus();
      }
      default:
        if (fd >= 0) close(fd);
        return absl::InternalError(absl::StrFormat("unknown request %d", static_cast<int>(op)));
    }
  }

  // The warm path: decodes into fixed storage and enqueues; allocates
  // nothing in kad's code.
  void launch() {
    auto q = queues_.find(launch_.queue);
    auto k = kernels_.find(launch_.kernel);
    if (q == queues_.end() || k == kernels_.end() || launch_.nargs > kMaxKernelArgs) {
      std::fprintf(stderr, "kad worker: a launch names no queue or kernel\n");
      _exit(3);
    }
    WorkerQueueState& state = *q->second;
    const uint64_t seq = ++state.launched;
    const EventId previous = seq > 1 ? state.events[(seq - 1) % WorkerQueueState::kRing] : 0;
    for (uint32_t i = 0; i < launch_.nargs; ++i) {
      const ArgRecord& a = launch_.args[i];
      KernelArg& out = args_[i];
      out = KernelArg{};
      out.kind = static_cast<ArgKind>(a.kind);
      out.scalar = static_cast<ScalarType>(a.scalar);
      out.local_bytes = a.local_bytes;
      if (out.kind == ArgKind::kBuffer || out.kind == ArgKind::kConstBuffer) {
        auto b = buffers_.find(a.value);
        if (b == buffers_.end()) {
          std::fprintf(stderr, "kad worker: a launch names no buffer\n");
          _exit(3);
        }
        out.buffer = b->second->buffer.get();
      } else {
        out.bits = a.value;
      }
    }
    absl::StatusOr<EventId> event =
        state.queue->enqueue_kernel(*k->second, launch_.geometry, launch_.context,
                                    std::span<const KernelArg>(args_.data(), launch_.nargs));
    if (!event.ok() && state.failed.ok()) {
      state.failed = event.status();
      state.failed_at = seq;
    }
    // A refused launch waits for what came before it.
    state.events[seq % WorkerQueueState::kRing] = event.ok() ? *event : previous;
  }

  absl::Status wait(const WaitRecord& w) {
    auto q = queues_.find(w.queue);
    if (q == queues_.end()) return absl::InternalError("a wait names no queue");
    WorkerQueueState& state = *q->second;
    const uint64_t seq = std::min(w.event, state.launched);
    if (!state.failed.ok() && state.failed_at <= seq) {
      absl::Status failed = std::move(state.failed);
      state.failed = absl::OkStatus();
      return failed;
    }
    if (seq == 0) return absl::OkStatus();
    const uint64_t held = oldest_held_event(seq, state.launched + 1, WorkerQueueState::kRing);
    const EventId event = state.events[held % WorkerQueueState::kRing];
    return event == 0 ? absl::OkStatus() : state.queue->wait(event);
  }

  absl::Status compile(Op op, std::span<const std::byte> payload) {
    IdRecord id;
    if (payload.size() < sizeof id) return absl::InternalError("short compile");
    std::memcpy(&id, payload.data(), sizeof id);
    wire::Compile message;
    if (!message.ParseFromArray(payload.data() + sizeof id,
                                static_cast<int>(payload.size() - sizeof id))) {
      return absl::InternalError("a compile request that does not parse");
    }
    absl::StatusOr<std::unique_ptr<CompiledKernel>> compiled;
    absl::StatusOr<OwnedCompileRequest> request = from_message(message);
    uint32_t flags = 0;
    if (!request.ok()) {
      compiled = request.status();
    } else if (op == Op::kLoadKernel && !message.program_binary().empty()) {
      // Built by a compile worker: loaded, not compiled again.
      compiled = device_.load_program_binary(request->view(), message.program_binary());
      flags = kLoadedProgramBinary;
    } else {
      compiled = device_.compile(request->view());
    }
    if (op == Op::kLoadKernel) {
      absl::Status status = compiled.status();
      if (compiled.ok()) kernels_[id.id] = *std::move(compiled);
      return reply(status, status.ok() ? flags : 0);
    }
    wire::CompileReply answer = to_reply(compiled);
    if (compiled.ok()) {
      // A device without program binaries leaves it empty: then each worker
      // that needs the kernel compiles it.
      absl::StatusOr<std::string> binary = device_.program_binary(**compiled);
      if (binary.ok()) *answer.mutable_program_binary() = *std::move(binary);
    }
    const std::string out = answer.SerializeAsString();
    if (compiled.ok()) kernels_[id.id] = *std::move(compiled);
    return connection_.send(Op::kCompileReply,
                            std::as_bytes(std::span<const char>(out.data(), out.size())));
  }

  absl::Status import(const ImportRecord& r, int fd) {
    if (fd < 0) return absl::InternalError("a buffer came without its memory");
    auto b = std::make_unique<ImportedBuffer>();
    b->bytes = r.bytes;
    b->data = mmap(nullptr, r.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (b->data == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("the worker cannot map a buffer of %d bytes", r.bytes));
    }
    absl::StatusOr<std::unique_ptr<Buffer>> buffer =
        device_.import_host_memory({b->data, r.bytes, -1});
    if (!buffer.ok()) return buffer.status();
    b->buffer = *std::move(buffer);
    buffers_[r.buffer] = std::move(b);
    return absl::OkStatus();
  }

  Connection connection_;
  Device& device_;
  LaunchRecord launch_;
  std::array<KernelArg, kMaxKernelArgs> args_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<CompiledKernel>> kernels_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<ImportedBuffer>> buffers_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<WorkerQueueState>> queues_;
};

}  // namespace

void harden_worker_process(int fd) {
  // Dies with the daemon, whichever way it ends. The daemon is the peer of
  // the worker's socket (it made the pair): one that ended before the
  // death signal was set is no longer this process's parent. (Not "the
  // parent is PID 1": in a container kad itself is PID 1.)
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  ucred daemon{};
  socklen_t length = sizeof(daemon);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &daemon, &length) != 0 || getppid() != daemon.pid)
    _exit(0);
  // A crashing kernel leaves no core file behind, and the process cannot be
  // read by another of the same user (nor dumped).
  rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  prctl(PR_SET_DUMPABLE, 0);
  // Nothing of the daemon's reaches client code but its own connection.
  if (fd > 3) {
    dup2(fd, 3);
    close(fd);
  }
  syscall(SYS_close_range, 4u, ~0u, 0u);
}

int serve_worker(int fd, Device* device, const absl::Status& why, const Confinement& walls) {
  Connection connection(fd);
  HelloRecord hello{static_cast<int32_t>(getpid()), static_cast<int32_t>(why.code()), walls.walls,
                    walls.landlock_abi};
  const absl::string_view m = why.message();
  if (!connection
           .send(Op::kHello, bytes_of(hello),
                 std::as_bytes(std::span<const char>(m.data(), m.size())))
           .ok() ||
      device == nullptr) {
    return device == nullptr ? 2 : 0;
  }
  return WorkerServer(fd, *device).run();
}

}  // namespace kad::server::worker
