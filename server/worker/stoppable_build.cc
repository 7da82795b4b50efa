#include "server/worker/stoppable_build.h"

#include <signal.h>

namespace kad::server::worker {

void StoppableBuild::stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  if (pid_ > 0) kill(pid_, SIGKILL);
}

bool StoppableBuild::stopped() const {
  absl::MutexLock lock(&mu_);
  return stopped_;
}

bool StoppableBuild::started(pid_t pid) {
  absl::MutexLock lock(&mu_);
  if (stopped_) return false;
  pid_ = pid;
  return true;
}

void StoppableBuild::ended() {
  absl::MutexLock lock(&mu_);
  pid_ = 0;
}

}  // namespace kad::server::worker
