// A compile worker's build that another thread may stop: kad stopping
// while a build runs in the background (wide_builds.h).
#pragma once

#include <sys/types.h>

#include "absl/synchronization/mutex.h"

namespace kad::server::worker {

// A build that another thread may stop (kad stopping): the compile
// worker's pid while it builds, which stop() kills. The pid is cleared
// under the lock before the worker is reaped, so that stop() never signals
// a pid that another process may have taken since.
class StoppableBuild {
 public:
  // Kills the compile worker, if one builds, and any that starts later.
  void stop();
  bool stopped() const;
  // build_program's: false when stop() came first.
  bool started(pid_t pid);
  void ended();

 private:
  mutable absl::Mutex mu_;
  pid_t pid_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kad::server::worker
