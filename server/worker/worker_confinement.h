// The walls around a worker (DESIGN §8). A worker runs client kernels as
// native code, and a kernel that corrupts memory may take the process over;
// what it can then do is what this file leaves it:
//
//  - files (Landlock): read the system's libraries and the toolchain, a few
//    entries of /proc and /sys that the driver reads, and nothing of /etc but
//    the loader's cache and the OpenCL vendor list; nothing of kad's code
//    cache, which holds every tenant's code (the daemon sends the code it
//    lowered with each compile: Device::lower_ahead); write only its own
//    folder (`--worker-dir`, its $TMPDIR, its driver's and code caches).
//    No /home, no /root beyond the caches, no /run, no kad socket to create;
//  - TCP: neither bind nor connect (Landlock ABI 4);
//  - other processes: none to see or signal, in a PID namespace of its own
//    where kad may make one (namespaced_spawn.h); no signal to and no
//    abstract UNIX socket of anything outside its walls (Landlock ABI 6), no
//    ptrace or process_vm_* (seccomp, and Landlock's own rule); on kernels
//    without Landlock ABI 6, seccomp still refuses every signal to kad (the
//    process that started it), to its process group and to every process,
//    by bare thread id or through a pidfd;
//  - privileges: none (capabilities dropped, bounding set included; no new
//    privileges), so a worker of a daemon that runs as root is not root's
//    equal;
//  - system calls (seccomp): no socket() at all, no namespaces, mounts,
//    module loading, BPF, perf, keyrings, io_uring or handle-based opens.
//
// The compilers a worker starts inherit all of it, under their own, tighter
// sandbox (core/tool_sandbox.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tool_sandbox.h"

namespace kad::server::worker {

// What a worker's walls hold, as the worker reports it in its hello.
enum WallBits : uint32_t {
  kWallFiles = 1u << 0,
  kWallTcp = 1u << 1,
  kWallSignalsAndAbstractSockets = 1u << 2,
  kWallNoCapabilities = 1u << 3,
  kWallSeccomp = 1u << 4,
  // PID 1 of a PID namespace of its own (namespaced_spawn.h): no process
  // outside it to see or signal.
  kWallOwnProcesses = 1u << 5,
  // A bound on the processes and threads in its namespace (RLIMIT_NPROC,
  // --worker-max-processes): a fork bomb fails there. kad clears it where
  // it runs as root, whose processes Linux holds to no such bound.
  kWallProcessLimit = 1u << 6,
  // Its folder is a tmpfs of its own, of --worker-max-folder-bytes
  // (namespaced_spawn.h): what a client's code writes there fills that
  // alone, not the machine's disk or memory.
  kWallFolderSize = 1u << 7,
  // A bound on the memory it allocates for itself (RLIMIT_DATA,
  // --worker-max-memory): a runaway stops there, not at the machine's OOM.
  kWallMemoryLimit = 1u << 8,
};
inline constexpr uint32_t kAllWalls = kWallFiles | kWallTcp | kWallSignalsAndAbstractSockets |
                                      kWallNoCapabilities | kWallSeccomp | kWallOwnProcesses |
                                      kWallProcessLimit | kWallFolderSize | kWallMemoryLimit;

// "files, TCP, signals and abstract sockets, capabilities, system calls, own
// PID namespace, process limit, folder size, memory limit" and, for what is missing, "not: TCP
// (Landlock ABI 3)".
std::string describe_walls(uint32_t walls, int landlock_abi);

// The folders and files a worker of this process may read and write:
// `worker_dir` (its own, its caches in it) and the kernel toolchain's files.
ToolSandbox worker_sandbox(const std::string& worker_dir);

struct Confinement {
  uint32_t walls = 0;  // WallBits
  int landlock_abi = 0;
};

// Puts this process behind its walls for good: capabilities, then Landlock
// with `sandbox`, then seccomp. Each holds for the calling thread and what it
// starts, so call it while the process has one thread: before the driver
// starts its own (FAILED_PRECONDITION otherwise). Walls this kernel lacks are
// left out and reported as missing; an error when one it has fails to rise.
// `folder`: the worker's own, whose bound it reports (kWallFolderSize).
absl::StatusOr<Confinement> confine_worker(const ToolSandbox& sandbox,
                                           const std::string& folder = "");

// confine_worker's last wall alone (seccomp), which also holds on kernels
// without Landlock: for tests of what it refuses by itself.
absl::Status confine_system_calls();

}  // namespace kad::server::worker
