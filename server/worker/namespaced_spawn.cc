#include "server/worker/namespaced_spawn.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_format.h"

namespace kad::server::worker {
namespace {

struct ChildStart {
  const char* path;
  char* const* argv;
  char* const* envp;
  int socket_fd;
  uint32_t max_processes;
  uint64_t max_data_bytes = 0;
  uid_t run_as = 0;
  // With a folder to bound: written by the parent before the clone, so that
  // the child only makes system calls.
  const char* folder = nullptr;
  char uid_map[48] = {};
  char gid_map[48] = {};
  char tmpfs_options[128] = {};
  // Written by the child when a step before its exec fails.
  const char* failed_step = nullptr;
  int error = 0;
};

// Writes `text` to the file at `path`; false with errno set when it cannot.
// (In the child: system calls only.)
bool write_file(const char* path, const char* text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const size_t n = strlen(text);
  const bool written = write(fd, text, n) == static_cast<ssize_t>(n);
  const int error = errno;
  close(fd);
  errno = error;
  return written;
}

// In the child: its folder covered by a tmpfs of its own. False when the
// kernel refuses a step (the worker then starts without it).
bool bound_folder(const ChildStart& c) {
  // Its own ids mapped to themselves, before any file is made there (a
  // worker with a uid of its own has no user namespace to map them in).
  if (c.run_as == 0 && (!write_file("/proc/self/setgroups", "deny") ||
                        !write_file("/proc/self/uid_map", c.uid_map) ||
                        !write_file("/proc/self/gid_map", c.gid_map)))
    return false;
  // Nothing it mounts reaches kad's namespace.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  // Not noexec: the driver loads the kernels it builds there.
  return mount("kad-worker", c.folder, "tmpfs", MS_NOSUID | MS_NODEV, c.tmpfs_options) == 0;
}

// The child, until its exec: it runs on a stack of its own but shares kad's
// memory while kad's thread waits for it (CLONE_VM | CLONE_VFORK, as
// posix_spawn does), so it makes system calls only: nothing that allocates
// or takes a lock another of kad's threads may hold.
int start_child(void* arg) {
  auto* c = static_cast<ChildStart*>(arg);
  auto fail = [c](const char* step) {
    c->error = errno;
    c->failed_step = step;
    _exit(127);
  };
  if (c->folder != nullptr) bound_folder(*c);
  // No handler of kad's may run here: signals it catches go back to their
  // default before the mask (all blocked by the parent) opens.
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction action {};
    if (sigaction(sig, nullptr, &action) != 0) continue;  // glibc's own, or none
    if (action.sa_handler == SIG_DFL || action.sa_handler == SIG_IGN) continue;
    action.sa_handler = SIG_DFL;
    action.sa_flags = 0;
    sigaction(sig, &action, nullptr);
  }
  // dup2 clears close-on-exec on the copy; a socket already at 3 needs it
  // cleared by hand.
  if (c->socket_fd == 3) {
    if (fcntl(3, F_SETFD, 0) != 0) fail("fcntl of its socket");
  } else if (dup2(c->socket_fd, 3) != 3) {
    fail("dup2 of its socket");
  }
  // Its own process group: a stop takes what it started too.
  if (setpgid(0, 0) != 0) fail("setpgid");
  // Every capability of the new user namespace, bounding set included, goes
  // at the exec; the bounding set only while the child still may drop it.
  for (int cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; ++cap)
    prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  // Soft and hard: nothing in the namespace may raise it again (that takes
  // CAP_SYS_RESOURCE in kad's namespace).
  if (c->max_processes > 0) {
    const rlimit processes{c->max_processes, c->max_processes};
    if (setrlimit(RLIMIT_NPROC, &processes) != 0) fail("setrlimit of its processes");
  }
  if (c->max_data_bytes > 0) {
    const rlimit data{c->max_data_bytes, c->max_data_bytes};
    if (setrlimit(RLIMIT_DATA, &data) != 0) fail("setrlimit of its memory");
  }
  // Root becomes the worker's own uid last, when nothing is left that needs
  // root's capabilities; all of them go with it (every uid is then not 0).
  // Raw system calls: glibc's would try to change the ids of kad's threads,
  // whose memory this child shares.
  if (c->run_as != 0) {
    if (syscall(SYS_setgroups, 0, nullptr) != 0) fail("setgroups");
    if (syscall(SYS_setresgid, c->run_as, c->run_as, c->run_as) != 0) fail("setresgid");
    if (syscall(SYS_setresuid, c->run_as, c->run_as, c->run_as) != 0) fail("setresuid");
  }
  sigset_t none;
  sigemptyset(&none);
  if (sigprocmask(SIG_SETMASK, &none, nullptr) != 0) fail("sigprocmask");
  execve(c->path, c->argv, c->envp);
  fail("execve");
  return 127;
}

}  // namespace

absl::StatusOr<pid_t> spawn_in_own_namespaces(const char* path, char* const argv[],
                                              char* const envp[], int socket_fd,
                                              const NamespaceLimits& limits) {
  constexpr size_t kStackBytes = 256 * 1024;
  void* stack = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) {
    return absl::UnavailableError(
        absl::StrFormat("cannot map a stack to start a worker: %s", std::strerror(errno)));
  }
  if (limits.run_as != 0 && geteuid() != 0) {
    munmap(stack, kStackBytes);
    return absl::FailedPreconditionError(
        absl::StrFormat("kad runs as uid %d, not root: it cannot start a worker as uid %d",
                        geteuid(), limits.run_as));
  }
  ChildStart child{path,         argv, envp, socket_fd, limits.max_processes, limits.max_data_bytes,
                   limits.run_as};
  // Root makes the namespaces with its own privileges; anyone else needs a
  // user namespace to make them in.
  int flags = CLONE_VM | CLONE_VFORK | CLONE_NEWPID | SIGCHLD;
  if (limits.run_as == 0) flags |= CLONE_NEWUSER;
  if (limits.folder != nullptr && limits.folder_bytes > 0) {
    child.folder = limits.folder;
    // The worker's own uid owns the tmpfs; kad's, mapped to itself, does
    // in a user namespace.
    const uid_t owner = limits.run_as != 0 ? limits.run_as : geteuid();
    const gid_t group = limits.run_as != 0 ? limits.run_as : getegid();
    std::snprintf(child.uid_map, sizeof child.uid_map, "%u %u 1", owner, owner);
    std::snprintf(child.gid_map, sizeof child.gid_map, "%u %u 1", group, group);
    std::snprintf(child.tmpfs_options, sizeof child.tmpfs_options,
                  "size=%llu,nr_inodes=%llu,mode=0700,uid=%u,gid=%u",
                  static_cast<unsigned long long>(limits.folder_bytes),
                  static_cast<unsigned long long>(std::max<uint64_t>(limits.folder_files, 1)),
                  owner, group);
    flags |= CLONE_NEWNS;
  }
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  pid_t pid = clone(start_child, static_cast<char*>(stack) + kStackBytes, flags, &child);
  if (pid < 0 && (flags & CLONE_NEWNS) != 0) {
    // No mount namespace to be had where user and PID ones are (a
    // confinement of kad's own): the worker goes without a folder of its
    // own, and says so in its walls, rather than without its namespaces.
    child.folder = nullptr;
    pid = clone(start_child, static_cast<char*>(stack) + kStackBytes, flags & ~CLONE_NEWNS, &child);
  }
  const int clone_error = errno;
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  munmap(stack, kStackBytes);
  if (pid < 0) {
    return absl::UnavailableError(absl::StrFormat("cannot make a %s namespace for a worker: %s",
                                                  limits.run_as != 0 ? "PID" : "user and PID",
                                                  std::strerror(clone_error)));
  }
  if (child.failed_step != nullptr) {  // it exited before its exec
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return absl::InternalError(absl::StrFormat("starting a worker (%s) failed in %s: %s", path,
                                               child.failed_step, std::strerror(child.error)));
  }
  return pid;
}

}  // namespace kad::server::worker
