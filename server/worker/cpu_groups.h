// Tenants' shares of the CPU, where kad may make control groups (DESIGN §8).
//
// Each tenant's workers go into a CPU control group of their own, under one
// group of this kad (`kad-PID` beside kad's own group), whose weight is the
// tenant's: Linux's scheduler then shares the cores between tenants by
// their weights, however many workers and threads each has (niceness, the
// fallback, weighs each thread, so a tenant with ten sessions would get ten
// shares). Priority classes are 100x apart in weight: a lower class gets
// about one percent of the CPU while a higher one keeps it busy.
//
// cgroup v2 needs a delegated subtree whose `cgroup.subtree_control` already
// enables `cpu` for kad's own group (systemd's Delegate=yes with kad in a
// leaf of its own); cgroup v1 needs the `cpu` hierarchy writable (root). On
// neither, open() says why, and kad falls back to niceness.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kad::server::worker {

class CpuGroups {
 public:
  // This process's groups, under the CPU hierarchy that /proc/self/cgroup
  // and /proc/self/mountinfo name; `root` overrides the hierarchy's mount
  // point (tests). Also removes the groups of kads that are gone.
  static absl::StatusOr<std::unique_ptr<CpuGroups>> open(const std::string& root = "");
  // Removes the tenants' groups (empty once their workers ended).
  ~CpuGroups();

  // A group's weight: `weight` within its class; a class below the highest
  // configured one is `classes_below` x 100 times lighter.
  static uint64_t group_weight(uint32_t weight, int classes_below, bool v2);

  // Moves `pid` (every thread of it) into `tenant`'s group, made on first
  // use with weight group_weight(weight, classes_below), and reweighs.
  absl::Status place(pid_t pid, const std::string& tenant, uint32_t weight, int classes_below);

  // Weighs this kad's group as so many processes as its groups hold
  // workers (a unit each). A group competes with the tasks beside it as one
  // task of its weight: at the default weight, 32 workers together got as
  // much CPU as one of kad's threads or one client, and 32 clients through
  // workers 6.9-7.1k launches/s against 8.1-10.5k with the weight they
  // would have as plain processes. So the groups only divide between
  // tenants what the workers get, never shrink it. After a worker ended.
  void reweigh();
  // The weight reweigh gives a group of `workers` workers.
  static uint64_t population_weight(size_t workers, bool v2);

  bool v2() const { return v2_; }
  // The directory of this kad's groups.
  const std::string& path() const { return path_; }

 private:
  CpuGroups(std::string path, bool v2) : path_(std::move(path)), v2_(v2) {}

  const std::string path_;
  const bool v2_;
  absl::Mutex mu_;
  void reweigh_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::flat_hash_set<std::string> made_ ABSL_GUARDED_BY(mu_);
  uint64_t weight_ ABSL_GUARDED_BY(mu_) = 0;  // this kad's group's, as last written
};

}  // namespace kad::server::worker
