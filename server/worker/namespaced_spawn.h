// Starts a worker in a user and PID namespace of its own (DESIGN §8).
//
// A worker runs client kernels as native code. Inside its own PID namespace
// it is PID 1 and sees no process outside it: it cannot signal kad, another
// session's worker or anything else on the machine, whatever the kernel's
// Landlock version (signal scoping came in Linux 6.12; Debian 12 runs 6.1).
// Everything it starts dies with it, since the kernel ends a PID namespace
// whose first process ends: no compiler it started, nor anything a kernel
// started and moved to a session of its own, outlives it. The user namespace
// is what lets kad make the PID namespace without privileges; no uid is
// mapped into it, so the worker holds no capability there after its exec
// and is nobody to itself, while the host still sees it as kad's user.
//
// With a folder to bound, the worker also gets a mount namespace of its own,
// in which a tmpfs of the given size and number of files covers its folder:
// what a client's code writes there (a worker's only writable folder) can
// fill that alone, not the disk or the memory of the machine. A tmpfs made
// in a user namespace takes files only from ids mapped there, so kad's uid
// and gid are then mapped to themselves (one id each, setgroups denied):
// the worker is itself, not nobody, to itself, and no more than that.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace kad::server::worker {

struct NamespaceLimits {
  // Bounds the processes and threads that may run in its user namespace at
  // once, itself included (RLIMIT_NPROC, which Linux counts per user
  // namespace since 5.14, so a worker's count is its own and not kad's
  // user's): a fork or thread bomb fails with EAGAIN there. Linux holds no
  // process of root's to it: under a kad that runs as root, workers have no
  // such bound (WorkerProcess reports the wall missing). 0: none.
  uint32_t max_processes = 0;
  // Bounds the memory the worker allocates for itself: its heap, thread
  // stacks and other private writable mappings (RLIMIT_DATA; the memfds of
  // its session's buffers, which kad charges, do not count). Root is held
  // to it too. 0: none.
  uint64_t max_data_bytes = 0;
  // The worker's folder, covered in its mount namespace by a tmpfs of
  // `folder_bytes` and `folder_files`; none when null or 0 bytes. Where the
  // kernel refuses the mount the worker starts without it (and says so in
  // its walls, worker_confinement.h).
  const char* folder = nullptr;
  uint64_t folder_bytes = 0;
  uint64_t folder_files = 0;
  // Under a kad that runs as root: the uid (and gid) the worker runs as, one
  // of its own (worker_uids.h), with no supplementary groups. Its PID and
  // mount namespaces are then made with root's own privileges, and it gets
  // no user namespace: it is that uid to the whole machine, with no
  // capability, held to `max_processes`, and owns its folder (the tmpfs is
  // made for it). 0: it runs as kad's user.
  uid_t run_as = 0;
};

// Starts `path` with `argv` and `envp` in new user and PID namespaces (PID
// alone with `limits.run_as`; and a mount namespace, with a folder to bound), with `socket_fd` as
// its fd 3, in a process group of its own, with no signal blocked, and with an empty capability
// bounding set, within `limits`. Its pid as kad sees it. UNAVAILABLE where this kernel or kad's own
// confinement allows no new namespaces (a container's seccomp profile, user.max_user_namespaces=0):
// the caller then starts the worker in kad's namespaces.
absl::StatusOr<pid_t> spawn_in_own_namespaces(const char* path, char* const argv[],
                                              char* const envp[], int socket_fd,
                                              const NamespaceLimits& limits = {});

}  // namespace kad::server::worker
