// Under a kad that runs as root, each worker runs as a uid of its own
// (DESIGN §8). A worker that kept kad's uid would be root to the kernel:
// Linux holds no process of root's to RLIMIT_NPROC (a taken-over worker
// could fork-bomb the machine), and the files root owns would be its own
// but for Landlock. A uid of its own, taken from a range that no user of
// the machine has, is held to the process limit, owns nothing outside its
// folder, and is no other worker's: each worker is in a PID namespace of
// its own, whose processes all end with it before its uid is handed out
// again.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kad::server::worker {

// The default first uid (0x7A000000): in the range systemd leaves unused
// (0x70000000-0x7FFDFFFF: past users, dynamic users, the usual subuid
// ranges and systemd-nspawn's containers), and below 2^31, which some tools
// take for a sign bit.
inline constexpr uid_t kDefaultWorkerUidBase = 0x7A000000;
inline constexpr uint32_t kWorkerUidCount = 65536;

class WorkerUids;

// One worker's uid, handed back when this goes (after its worker was reaped).
class WorkerUid {
 public:
  WorkerUid() = default;
  WorkerUid(std::shared_ptr<WorkerUids> from, uid_t uid) : from_(std::move(from)), uid_(uid) {}
  WorkerUid(WorkerUid&& other) noexcept { *this = std::move(other); }
  WorkerUid& operator=(WorkerUid&& other) noexcept;
  ~WorkerUid();
  // 0: none (the worker runs as kad's user).
  uid_t uid() const { return uid_; }

 private:
  std::shared_ptr<WorkerUids> from_;
  uid_t uid_ = 0;
};

// The uids [base, base + count) for workers, one per live worker, handed
// out in turn (a uid comes back into use as late as it can).
class WorkerUids : public std::enable_shared_from_this<WorkerUids> {
 public:
  static std::shared_ptr<WorkerUids> create(uid_t base, uint32_t count = kWorkerUidCount);

  // A uid no live worker has; RESOURCE_EXHAUSTED, naming the range, when
  // every one is in use.
  absl::StatusOr<WorkerUid> take();
  size_t in_use() const;
  uid_t base() const { return base_; }
  uint32_t count() const { return count_; }

 private:
  friend class WorkerUid;
  WorkerUids(uid_t base, uint32_t count) : base_(base), count_(count) {}
  void give_back(uid_t uid);

  const uid_t base_;
  const uint32_t count_;
  mutable absl::Mutex mu_;
  uint32_t next_ ABSL_GUARDED_BY(mu_) = 0;  // the offset tried first
  absl::flat_hash_set<uid_t> taken_ ABSL_GUARDED_BY(mu_);
};

// OK when no user or group the machine lists (getpwent, getgrent: the
// local files and any directory service that enumerates) has an id in
// [base, base + count); else FAILED_PRECONDITION naming the first found,
// its id and the range. A worker must share its uid with no one.
absl::Status check_uids_unused(uid_t base, uint32_t count);

// OK when a process of `uid` (with gid `uid` and no supplementary groups)
// may execute `executable`: every folder on its path searchable and the file
// executable by others. Checked by a child that becomes `uid` (kad must be
// root); else PERMISSION_DENIED naming the uid, the file and why.
absl::Status check_uid_may_run(uid_t uid, const std::string& executable);

}  // namespace kad::server::worker
