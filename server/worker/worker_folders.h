// Where workers' own folders go (DESIGN §8): under one folder per kad
// process, `$TMPDIR/kad-workers-XXXXXX`, on which kad holds a lock (flock)
// while it runs. A kad that ends as it should removes its workers' folders
// as they end; one that was killed (SIGKILL, the OOM killer) cannot. The
// next kad to start on the machine removes every such folder of its own
// user whose lock no process holds: a crash leaves nothing behind for
// longer than the next start.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace kad::server::worker {

// This process's folder for its workers' folders, made (and the stale ones
// of killed kads removed) at the first call.
absl::StatusOr<std::string> workers_root();

// Removes the folders of kads that hold no lock on them (made by an earlier
// kad of this user) under `tmp`; returns how many went. Called by
// workers_root() before it makes its own.
int remove_stale_workers_roots(const std::string& tmp);

}  // namespace kad::server::worker
