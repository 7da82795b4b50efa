#include "server/worker/worker_process.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/worker/abort_status.h"
#include "server/worker/namespaced_spawn.h"
#include "server/worker/worker_codec.h"
#include "server/worker/worker_confinement.h"
#include "server/worker/worker_folders.h"
#include "spdlog/spdlog.h"

extern char** environ;

namespace kad::server::worker {
namespace {

// A uid of `uids` for a worker, owning its folder `dir` (with a tmpfs over
// it or not). Given back if the folder cannot be given.
absl::StatusOr<WorkerUid> take_uid(WorkerUids& uids, const std::string& dir) {
  absl::StatusOr<WorkerUid> taken = uids.take();
  if (!taken.ok()) {
    return absl::UnavailableError(
        absl::StrFormat("cannot start a worker: %s", taken.status().message()));
  }
  if (chown(dir.c_str(), taken->uid(), taken->uid()) != 0) {
    return absl::UnavailableError(absl::StrFormat("cannot give a worker's folder %s to uid %d: %s",
                                                  dir, taken->uid(), std::strerror(errno)));
  }
  return taken;
}

}  // namespace

absl::Status WorkerProcess::set_nice(int nice) {
  std::error_code ec;
  int threads = 0;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid_, "/task"), ec)) {
    const std::string tid = task.path().filename().string();
    id_t id = 0;
    if (!absl::SimpleAtoi(tid, &id)) continue;
    if (setpriority(PRIO_PROCESS, id, nice) != 0) {
      return absl::PermissionDeniedError(
          absl::StrFormat("cannot give thread %s of worker %d niceness %d: %s", tid, pid_, nice,
                          std::strerror(errno)));
    }
    ++threads;
  }
  if (ec || threads == 0) {
    return absl::UnavailableError(
        absl::StrFormat("cannot list the threads of worker %d: %s", pid_, ec.message()));
  }
  return absl::OkStatus();
}

uint64_t default_worker_max_memory() {
  return (uint64_t{2} << 30) +
         (uint64_t{16} << 20) * std::max(1u, std::thread::hardware_concurrency());
}

const std::string& tcmalloc_library() {
  static const std::string path = [] {
    // Where Debian and others install it; a missing library leaves glibc's.
    for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
                            "/usr/lib", "/usr/local/lib"}) {
      std::string candidate = absl::StrCat(dir, "/libtcmalloc_minimal.so.4");
      if (access(candidate.c_str(), R_OK) == 0) return candidate;
    }
    return std::string();
  }();
  return path;
}

namespace {

// kad's environment for a worker, with `preload` added to LD_PRELOAD.
std::vector<std::string> worker_environment(const std::string& preload) {
  std::vector<std::string> env;
  std::string preloads = preload;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "LD_PRELOAD=", 11) == 0) {
      const std::string before = *e + 11;
      if (!before.empty()) preloads = preload.empty() ? before : absl::StrCat(before, ":", preload);
      continue;
    }
    env.emplace_back(*e);
  }
  if (!preloads.empty()) env.push_back(absl::StrCat("LD_PRELOAD=", preloads));
  return env;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::spawn(const WorkerCommand& command,
                                                                    const std::string& device_id) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::UnavailableError(
        absl::StrFormat("cannot make a worker's socketpair: %s", std::strerror(errno)));
  }
  // The worker's own folder, the only one it may write besides the caches:
  // made here, since a worker that is killed cannot remove it (nor a kad
  // that is killed: worker_folders.h).
  std::error_code ec;
  absl::StatusOr<std::string> root = workers_root();
  if (!root.ok()) {
    close(fds[0]);
    close(fds[1]);
    return root.status();
  }
  std::string dir = absl::StrCat(*root, "/kad-worker-XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) {
    close(fds[0]);
    close(fds[1]);
    return absl::UnavailableError(
        absl::StrFormat("cannot make a worker's folder %s: %s", dir, std::strerror(errno)));
  }
  std::vector<std::string> args{command.executable, "--worker-fd=3",
                                absl::StrCat("--worker-device=", device_id),
                                absl::StrCat("--worker-dir=", dir),
                                // Also set by the worker itself, for a start without namespaces.
                                absl::StrCat("--worker-max-memory=", command.max_data_bytes)};
  args.insert(args.end(), command.args.begin(), command.args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = worker_environment(command.preload);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  // As a uid of its own under root (worker_uids.h).
  WorkerUid uid;
  if (command.uids) {
    absl::StatusOr<WorkerUid> own = take_uid(*command.uids, dir);
    if (!own.ok()) {
      close(fds[0]);
      close(fds[1]);
      std::filesystem::remove_all(dir, ec);
      return own.status();
    }
    uid = *std::move(own);
  }
  // In namespaces of its own where kad may make them (namespaced_spawn.h),
  // else in kad's, said once.
  absl::StatusOr<pid_t> namespaced =
      spawn_in_own_namespaces(command.executable.c_str(), argv.data(), envp.data(), fds[1],
                              {.max_processes = command.max_processes,
                               .max_data_bytes = command.max_data_bytes,
                               .folder = dir.c_str(),
                               .folder_bytes = command.max_folder_bytes,
                               .folder_files = command.max_folder_files,
                               .run_as = uid.uid()});
  if (namespaced.ok() || namespaced.status().code() != absl::StatusCode::kUnavailable) {
    close(fds[1]);
    if (!namespaced.ok()) {
      close(fds[0]);
      std::filesystem::remove_all(dir, ec);
      return namespaced.status();
    }
    return std::unique_ptr<WorkerProcess>(
        new WorkerProcess(*namespaced, fds[0], std::move(dir), device_id, std::move(uid)));
  }
  // Without a PID namespace nothing would end what a worker started before
  // its uid went to the next worker: such a worker keeps kad's uid.
  if (uid.uid() != 0 && chown(dir.c_str(), geteuid(), getegid()) != 0) {
    spdlog::warn("cannot take back a worker's folder {}: {}", dir, std::strerror(errno));
  }
  uid = WorkerUid();
  static std::once_flag said;
  std::call_once(said, [&] {
    spdlog::warn(
        "workers start in kad's PID namespace, as kad's own user ({}): a taken-over worker "
        "sees other processes, and may signal another session's worker where Landlock does not "
        "scope signals",
        std::string(namespaced.status().message()));
  });

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 clears close-on-exec on the copy: the worker keeps fd 3 alone.
  posix_spawn_file_actions_adddup2(&actions, fds[1], 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group: a stop takes the compilers it started too.
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);  // the daemon blocks SIGTERM in its threads
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int err =
      posix_spawn(&pid, command.executable.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (err != 0) {
    close(fds[0]);
    std::filesystem::remove_all(dir, ec);
    return absl::UnavailableError(
        absl::StrFormat("cannot start a worker (%s): %s", command.executable, std::strerror(err)));
  }
  return std::unique_ptr<WorkerProcess>(
      new WorkerProcess(pid, fds[0], std::move(dir), device_id, WorkerUid()));
}

absl::Status WorkerProcess::await_hello(absl::Time deadline) {
  Header header;
  HelloRecord hello;
  std::span<const std::byte> payload;
  absl::Status s = reader_.next(&header, &payload, nullptr, deadline, sizeof hello + 4096);
  if (s.ok() && (header.op != static_cast<uint32_t>(Op::kHello) || header.size < sizeof hello)) {
    s = absl::InternalError("the worker's first message is not a hello");
  }
  if (!s.ok()) {
    const std::string ended = s.code() == absl::StatusCode::kDeadlineExceeded ? stop() : reap();
    return absl::UnavailableError(absl::StrFormat("a worker for %s did not start (%s; it %s)",
                                                  device_id_, s.message(), ended));
  }
  std::memcpy(&hello, payload.data(), sizeof hello);
  if (hello.code != 0) {
    const std::string why(reinterpret_cast<const char*>(payload.data()) + sizeof hello,
                          payload.size() - sizeof hello);
    reap();
    return absl::UnavailableError(
        absl::StrFormat("a worker for %s cannot serve: %s", device_id_, why));
  }
  folder_fd_ =
      open(absl::StrCat("/proc/", pid_, "/root", dir_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  walls_ = hello.walls & kAllWalls;
  // The worker sees its limit but not that its user is root, which Linux
  // exempts from it (its uid is root's own, mapped to itself or unmapped in
  // its namespace); a uid of its own is held to it.
  if (getuid() == 0 && uid_.uid() == 0) walls_ &= ~kWallProcessLimit;
  landlock_abi_ = std::clamp(hello.landlock_abi, 0, 1 << 16);
  return absl::OkStatus();
}

absl::Status WorkerProcess::send(Op op, std::span<const std::byte> a, std::span<const std::byte> b,
                                 int pass_fd) {
  // Counted and woken before the bytes go: a message larger than the
  // socket's buffer blocks this send until the worker reads, which it does
  // only once the count says a message is owed. (A send that fails ends the
  // worker, counted or not.)
  if (launch_ring_) {
    launch_ring_->note_message();
    launch_ring_->wake();
  }
  return connection_.send(op, a, b, pass_fd);
}

absl::Status WorkerProcess::read_status(absl::Time deadline, absl::Status* reported,
                                        uint32_t* flags) {
  Header header;
  std::span<const std::byte> payload;
  if (absl::Status s = reader_.next(&header, &payload, nullptr, deadline, kMaxReplyBytes); !s.ok())
    return s;
  StatusRecord r;
  if (header.op != static_cast<uint32_t>(Op::kStatus) || payload.size() < sizeof r) {
    return absl::InternalError(
        absl::StrFormat("the worker answered with message %d of %d bytes", header.op, header.size));
  }
  if (launch_ring_) {
    if (absl::Status s = launch_ring_->check_messages_read(); !s.ok()) return s;
  }
  std::memcpy(&r, payload.data(), sizeof r);
  if (flags != nullptr) *flags = r.flags;
  if (r.code < 0 || r.code > static_cast<int32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InternalError(absl::StrFormat("the worker answered with status %d", r.code));
  }
  *reported = r.code == 0
                  ? absl::OkStatus()
                  : absl::Status(static_cast<absl::StatusCode>(r.code),
                                 bounded_message(absl::string_view(
                                     reinterpret_cast<const char*>(payload.data() + sizeof r),
                                     payload.size() - sizeof r)));
  return absl::OkStatus();
}

absl::Status WorkerProcess::attach_launch_ring(absl::Time deadline) {
  absl::StatusOr<std::unique_ptr<LaunchRing>> ring = LaunchRing::create();
  if (!ring.ok()) return ring.status();
  const IdRecord r{0};
  if (absl::Status s = connection_.send(Op::kLaunchRing, bytes_of(r), {}, (*ring)->fd()); !s.ok())
    return s;
  absl::Status mapped;
  if (absl::Status s = read_status(deadline, &mapped); !s.ok()) return s;
  if (!mapped.ok()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("the worker cannot map its launch ring: %s", mapped.message()));
  }
  launch_ring_ = *std::move(ring);
  return absl::OkStatus();
}

WorkerProcess::~WorkerProcess() {
  stop();
  close(connection_.fd());
  if (folder_fd_ >= 0) close(folder_fd_);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string WorkerProcess::describe(int status) const {
  std::string how = "ended";
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    how = absl::StrFormat("was killed by signal %d (%s)", sig, strsignal(sig));
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == kAbortedExitStatus) {
    how = "aborted (SIGABRT: an assertion or fatal error in its driver)";
  } else if (WIFEXITED(status)) {
    how = absl::StrFormat("exited with status %d", WEXITSTATUS(status));
  }
  struct statfs folder {};
  if (folder_fd_ >= 0 && fstatfs(folder_fd_, &folder) == 0 && folder.f_type == TMPFS_MAGIC &&
      (folder.f_bavail == 0 || folder.f_ffree == 0)) {
    absl::StrAppendFormat(&how,
                          "; its folder was full (%d bytes and %d files, "
                          "--worker-max-folder-bytes)",
                          static_cast<uint64_t>(folder.f_blocks) * folder.f_bsize, folder.f_files);
  }
  return how;
}

std::string WorkerProcess::stop() {
  if (reaped_) return ended_;
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  ended_ = describe(status);
  return ended_;
}

bool WorkerProcess::reap_within(absl::Duration grace) {
  const absl::Time deadline = absl::Now() + grace;
  for (;;) {
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid_) {
      kill(-pid_, SIGKILL);  // what it started goes with it, while its group still has its id
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      reaped_ = true;
      ended_ = describe(status);
      return true;
    }
    if (absl::Now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::string WorkerProcess::finish(absl::Duration grace) {
  if (reaped_) return ended_;
  shutdown(connection_.fd(), SHUT_RDWR);
  if (launch_ring_) {
    // A worker asleep on its ring reads its socket, and sees the hang-up, now.
    launch_ring_->note_message();
    launch_ring_->wake();
  }
  return reap_within(grace) ? ended_ : stop();
}

std::string WorkerProcess::reap() {
  if (reaped_) return ended_;
  // A crash closes the socket as the process dies; give it a moment to end.
  return reap_within(absl::Seconds(1)) ? ended_ : stop();
}

}  // namespace kad::server::worker
