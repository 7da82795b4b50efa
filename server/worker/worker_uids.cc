#include "server/worker/worker_uids.h"

#include <grp.h>
#include <pwd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

namespace kad::server::worker {

WorkerUid& WorkerUid::operator=(WorkerUid&& other) noexcept {
  if (this != &other) {
    if (from_) from_->give_back(uid_);
    from_ = std::move(other.from_);
    uid_ = other.uid_;
    other.from_.reset();
    other.uid_ = 0;
  }
  return *this;
}

WorkerUid::~WorkerUid() {
  if (from_) from_->give_back(uid_);
}

std::shared_ptr<WorkerUids> WorkerUids::create(uid_t base, uint32_t count) {
  return std::shared_ptr<WorkerUids>(new WorkerUids(base, count));
}

absl::StatusOr<WorkerUid> WorkerUids::take() {
  absl::MutexLock lock(&mu_);
  for (uint32_t tried = 0; tried < count_; ++tried) {
    const uid_t uid = base_ + (next_ + tried) % count_;
    if (taken_.insert(uid).second) {
      next_ = (next_ + tried + 1) % count_;
      return WorkerUid(shared_from_this(), uid);
    }
  }
  return absl::ResourceExhaustedError(
      absl::StrFormat("every one of the %d worker uids from %d to %d is in use", count_, base_,
                      base_ + (count_ - 1)));
}

size_t WorkerUids::in_use() const {
  absl::MutexLock lock(&mu_);
  return taken_.size();
}

void WorkerUids::give_back(uid_t uid) {
  absl::MutexLock lock(&mu_);
  taken_.erase(uid);
}

absl::Status check_uids_unused(uid_t base, uint32_t count) {
  const auto in_range = [&](uint64_t id) { return id >= base && id - base < count; };
  const auto taken = [&](const char* what, const char* name, uint64_t id) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s %s has id %d, within the workers' uids %d to %d", what, name, id, base,
                        base + (count - 1)));
  };
  absl::Status found;
  setpwent();
  while (const passwd* p = getpwent()) {
    if (in_range(p->pw_uid)) {
      found = taken("user", p->pw_name, p->pw_uid);
      break;
    }
  }
  endpwent();
  if (!found.ok()) return found;
  setgrent();
  while (const group* g = getgrent()) {
    if (in_range(g->gr_gid)) {
      found = taken("group", g->gr_name, g->gr_gid);
      break;
    }
  }
  endgrent();
  return found;
}

absl::Status check_uid_may_run(uid_t uid, const std::string& executable) {
  const pid_t child = fork();
  if (child < 0) {
    return absl::UnavailableError(absl::StrFormat(
        "cannot start a process to check uid %d's access: %s", uid, std::strerror(errno)));
  }
  if (child == 0) {
    // System calls only: the daemon may have threads. Raw ones, so that
    // glibc does not try to change the ids of threads this copy lacks.
    if (syscall(SYS_setgroups, 0, nullptr) != 0 || syscall(SYS_setresgid, uid, uid, uid) != 0 ||
        syscall(SYS_setresuid, uid, uid, uid) != 0)
      _exit(255);
    _exit(access(executable.c_str(), X_OK) == 0 ? 0 : errno & 0x7f);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status)) {
    return absl::UnavailableError(
        absl::StrFormat("the process checking uid %d's access ended abnormally", uid));
  }
  const int code = WEXITSTATUS(status);
  if (code == 0) return absl::OkStatus();
  if (code == 255) {
    return absl::PermissionDeniedError(
        absl::StrFormat("kad cannot become uid %d (it must run as root)", uid));
  }
  return absl::PermissionDeniedError(
      absl::StrFormat("uid %d cannot execute %s: %s", uid, executable, std::strerror(code)));
}

}  // namespace kad::server::worker
