// A worker process as the daemon sees it (DESIGN §8): started from kad's own
// executable in worker mode on one end of a socketpair, watched through that
// connection, and ended with SIGKILL when it must stop. Reaped always.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/worker/launch_ring.h"
#include "server/worker/worker_protocol.h"
#include "server/worker/worker_uids.h"

namespace kad::server::worker {

// How to start a worker: the kad executable and the settings it shares with
// the daemon (toolchain limits, code cache), as command-line flags.
// The memory a worker may allocate for itself by default: its driver's
// thread stacks (8 MiB each, one per core) and a margin for its compiler
// and heap (a worker uses about 60 MB at rest): 2 GiB and 16 MiB per core.
uint64_t default_worker_max_memory();

// tcmalloc's library (libtcmalloc_minimal.so.4, Debian's
// libtcmalloc-minimal4), its path; empty where the machine has none. For
// --worker-malloc tcmalloc: PoCL allocates and frees per launch (events,
// commands, argument copies), and in a worker, which has threads, glibc's
// calloc and posix_memalign take their arena's lock for each. A lent
// pipeline ran 3-48 % faster on tcmalloc, 32 synchronous clients on 2 cores
// 20 % slower (bench/results/2026-12-08-worker-launch-costs/tcmalloc-experiment).
const std::string& tcmalloc_library();

struct WorkerCommand {
  std::string executable;
  std::vector<std::string> args;
  // Processes and threads a worker may run at once (--worker-max-processes;
  // 0: no bound). Held where a worker has namespaces of its own.
  uint32_t max_processes = 0;
  // What a worker's folder (its $TMPDIR, its driver's and code caches: the
  // only folder it may write) may hold, in a tmpfs of its own
  // (--worker-max-folder-bytes; 0: no bound, the folder is on kad's
  // temporary folder's disk). Held where a worker has namespaces of its own.
  uint64_t max_folder_bytes = uint64_t{512} << 20;
  uint64_t max_folder_files = 16384;
  // Memory a worker may allocate for itself (--worker-max-memory,
  // RLIMIT_DATA: heap, thread stacks; not its session's buffers). 0: none.
  // Set before its exec where it has namespaces of its own, and by the
  // worker itself (--worker-max-memory) where it has not.
  uint64_t max_data_bytes = default_worker_max_memory();
  // Under a kad that runs as root: the uids workers run as, one each
  // (--worker-uid-base; worker_uids.h). Null: workers run as kad's user.
  // Held where a worker has namespaces of its own.
  std::shared_ptr<WorkerUids> uids = nullptr;
  // A library each worker preloads (LD_PRELOAD, after any kad was started
  // with): its allocator (--worker-malloc). Empty: none.
  std::string preload = {};
};

class WorkerProcess {
 public:
  // Starts a worker for `device_id` (with its own folder); it is ready to
  // serve once await_hello() says so. UNAVAILABLE when it cannot start.
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> spawn(const WorkerCommand& command,
                                                              const std::string& device_id);
  // Waits until `deadline` for the worker's hello: OK when it serves, else
  // UNAVAILABLE saying why (it has no such device, could not raise its walls,
  // died, or said nothing in time), and the worker is ended.
  absl::Status await_hello(absl::Time deadline);
  ~WorkerProcess();  // stop()s it
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  pid_t pid() const { return pid_; }
  // What confines it, as it reported (WallBits), and its kernel's Landlock ABI.
  uint32_t walls() const { return walls_; }
  int landlock_abi() const { return landlock_abi_; }
  // Kernels (WorkerKernel ids) loaded before anyone took the worker, and
  // whose they are (WorkerPool::remember's `owner`): a worker holding one
  // owner's code is given to no other (DESIGN §8).
  absl::flat_hash_set<uint64_t> preloaded;
  std::string preloaded_for;
  // The tenant whose CPU group (cpu_groups.h) it is in; empty: none yet.
  std::string cpu_group;
  // The socket, to poll: messages go by send() alone, which counts them
  // for a worker asleep on its launch ring (LaunchRing::message_owed).
  int socket_fd() const { return connection_.fd(); }
  MessageReader& reader() { return reader_; }
  // Sends one message and wakes the worker if it sleeps on its launch ring.
  absl::Status send(Op op, std::span<const std::byte> a, std::span<const std::byte> b = {},
                    int pass_fd = -1);
  // Reads one kStatus answer into `reported`; the return is the transport's
  // status (a deadline, a closed connection, a malformed answer, a worker
  // that read more or fewer messages than were sent). `flags` (when given)
  // receives the answer's StatusFlags.
  absl::Status read_status(absl::Time deadline, absl::Status* reported, uint32_t* flags = nullptr);
  // Gives a session's worker its launch ring (after its hello); until then
  // launches go by the socket. FAILED_PRECONDITION: the worker could not
  // map it, and serves without; any other error: the worker is broken.
  absl::Status attach_launch_ring(absl::Time deadline);
  LaunchRing* launch_ring() { return launch_ring_.get(); }

  // Gives every thread of the worker the scheduling niceness `nice` (0 to
  // 19; threads it starts later inherit it): its tenant's share of the CPU
  // (DESIGN §8). Niceness only rises: no privilege is needed.
  absl::Status set_nice(int nice);

  // Kills the worker (and what it started) and reaps it; returns how it
  // ended ("killed by signal 9 (Killed)"). Idempotent.
  std::string stop();
  // Hangs up, so that the worker ends by itself (it exits when the daemon
  // hangs up), and kills it if it has not within `grace`.
  std::string finish(absl::Duration grace);
  // After its connection failed: waits a moment for the worker to end by
  // itself (a crash closes the connection as it dies), else kills it, and
  // returns how it ended: "killed by signal 11 (Segmentation fault)".
  std::string reap();

 private:
  WorkerProcess(pid_t pid, int fd, std::string dir, std::string device_id, WorkerUid uid)
      : pid_(pid),
        connection_(fd),
        dir_(std::move(dir)),
        device_id_(std::move(device_id)),
        uid_(std::move(uid)) {}
  // "was killed by signal 11 (Segmentation fault)", and whether its
  // folder was full (a driver that cannot write its files may crash).
  std::string describe(int wait_status) const;
  // Reaps the worker if it has ended within `grace`; false if it still runs.
  bool reap_within(absl::Duration grace);

  pid_t pid_;
  Connection connection_;
  MessageReader reader_{connection_};
  std::string dir_;  // its own folder (its $TMPDIR), removed with it
  // That folder as the worker sees it (a tmpfs of its own, in its mount
  // namespace), held open from its hello so that how it ended can say the
  // folder was full, once the namespace is gone. -1 when it cannot be opened.
  int folder_fd_ = -1;
  std::string device_id_;
  // Its uid of its own, handed back once it has been reaped (no process of
  // its PID namespace is left then); none: it runs as kad's user.
  WorkerUid uid_;
  std::unique_ptr<LaunchRing> launch_ring_;
  uint32_t walls_ = 0;
  int landlock_abi_ = 0;
  bool reaped_ = false;
  std::string ended_;
};

}  // namespace kad::server::worker
