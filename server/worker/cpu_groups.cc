#include "server/worker/cpu_groups.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kad::server::worker {

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

absl::Status write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  if (!out) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write `", text, "` to ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Where a hierarchy is mounted: fstype `cgroup2`, or `cgroup` with the
// `cpu` controller among its super options. Empty when it is not.
std::string mount_point(bool v2) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // "ID PARENT M:N ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER"
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::vector<std::string> head = absl::StrSplit(line.substr(0, dash), ' ');
    std::vector<std::string> tail = absl::StrSplit(line.substr(dash + 3), ' ');
    if (head.size() < 5 || tail.size() < 3) continue;
    if (v2 && tail[0] == "cgroup2") return head[4];
    if (!v2 && tail[0] == "cgroup") {
      for (absl::string_view option : absl::StrSplit(tail[2], ','))
        if (option == "cpu") return head[4];
    }
  }
  return "";
}

// This process's group in the hierarchy: v2's "0::PATH", or v1's line whose
// controllers include `cpu`. Empty when there is none.
std::string own_group(bool v2) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    if (v2 && f[0] == "0" && f[1].empty()) return f[2];
    if (!v2) {
      for (absl::string_view c : absl::StrSplit(f[1], ','))
        if (c == "cpu") return f[2];
    }
  }
  return "";
}

// Groups of kads that are gone (a crash leaves them): removed where empty.
void remove_stale(const std::string& base) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(base, ec)) {
    const std::string name = entry.path().filename().string();
    int pid = 0;
    if (name.rfind("kad-", 0) != 0 || !absl::SimpleAtoi(name.substr(4), &pid) || pid <= 0) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;
    for (const auto& tenant : std::filesystem::directory_iterator(entry.path(), ec))
      if (tenant.is_directory()) rmdir(tenant.path().c_str());
    rmdir(entry.path().c_str());
  }
}

// A tenant's name as a directory name: its own when it is plain, else hex.
std::string group_name(const std::string& tenant) {
  const bool plain =
      !tenant.empty() && tenant != "." && tenant != ".." &&
      std::all_of(tenant.begin(), tenant.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
      });
  if (plain) return tenant;
  std::string hex = "x-";
  for (unsigned char c : tenant) absl::StrAppend(&hex, absl::Hex(c, absl::kZeroPad2));
  return hex;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CpuGroups>> CpuGroups::open(const std::string& root) {
  // A v1 `cpu` hierarchy first (hybrid machines mount both); else v2.
  bool v2 = false;
  std::string mount = root.empty() ? mount_point(false) : root;
  std::string own = own_group(false);
  if (mount.empty() || own.empty()) {
    v2 = true;
    mount = root.empty() ? mount_point(true) : root;
    own = own_group(true);
  }
  if (mount.empty() || own.empty())
    return absl::UnavailableError("no cgroup hierarchy with the cpu controller is mounted");
  const std::string base = own == "/" ? mount : mount + own;
  if (v2) {
    // kad's group must hand `cpu` down to the groups it makes.
    const std::string control = read_all(base + "/cgroup.subtree_control");
    bool delegated = false;
    for (absl::string_view c : absl::StrSplit(control, absl::ByAnyChar(" \n")))
      delegated |= c == "cpu";
    if (!delegated) {
      return absl::UnavailableError(
          absl::StrCat(base,
                       " does not enable the cpu controller for groups below it (cgroup v2 needs a "
                       "delegated subtree: systemd's Delegate=yes)"));
    }
  }
  remove_stale(base);
  const std::string path = absl::StrCat(base, "/kad-", getpid());
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot make the CPU group ", path, ": ", std::strerror(errno)));
  }
  if (v2) {
    if (absl::Status s = write_file(path + "/cgroup.subtree_control", "+cpu"); !s.ok()) {
      rmdir(path.c_str());
      return s;
    }
  }
  return std::unique_ptr<CpuGroups>(new CpuGroups(path, v2));
}

CpuGroups::~CpuGroups() {
  absl::MutexLock lock(&mu_);
  for (const std::string& g : made_) rmdir((path_ + "/" + g).c_str());
  rmdir(path_.c_str());
}

uint64_t CpuGroups::group_weight(uint32_t weight, int classes_below, bool v2) {
  // v1 cpu.shares: 1024 a unit, 2 to 262144; v2 cpu.weight: 100 a unit, 1 to 10000.
  const uint64_t unit = v2 ? 100 : 1024, top = v2 ? 10000 : 262144, least = v2 ? 1 : 2;
  uint64_t w = std::min<uint64_t>(unit * std::max<uint32_t>(weight, 1), top);
  for (int i = 0; i < classes_below && w > least; ++i) w /= 100;
  return std::max(w, least);
}

absl::Status CpuGroups::place(pid_t pid, const std::string& tenant, uint32_t weight,
                              int classes_below) {
  const std::string name = group_name(tenant);
  const std::string dir = path_ + "/" + name;
  {
    absl::MutexLock lock(&mu_);
    if (!made_.contains(name)) {
      if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        return absl::PermissionDeniedError(
            absl::StrCat("cannot make the CPU group ", dir, ": ", std::strerror(errno)));
      }
      const std::string value = std::to_string(group_weight(weight, classes_below, v2_));
      if (absl::Status s = write_file(dir + (v2_ ? "/cpu.weight" : "/cpu.shares"), value); !s.ok())
        return s;
      made_.insert(name);
    }
  }
  // The move outside the lock: on cgroup v1 it waits ~10 ms for the kernel.
  if (absl::Status s = write_file(dir + "/cgroup.procs", std::to_string(pid)); !s.ok()) return s;
  reweigh();
  return absl::OkStatus();
}

uint64_t CpuGroups::population_weight(size_t workers, bool v2) {
  const uint64_t unit = v2 ? 100 : 1024, top = v2 ? 10000 : 262144;
  return std::min<uint64_t>(unit * std::max<size_t>(workers, 1), top);
}

void CpuGroups::reweigh() {
  absl::MutexLock lock(&mu_);
  reweigh_locked();
}

void CpuGroups::reweigh_locked() {
  // Processes, each once: cgroup v1's cgroup.procs may list one twice.
  absl::flat_hash_set<std::string> workers;
  for (const std::string& g : made_) {
    for (absl::string_view pid :
         absl::StrSplit(read_all(path_ + "/" + g + "/cgroup.procs"), '\n', absl::SkipEmpty()))
      workers.emplace(pid);
  }
  const uint64_t weight = population_weight(workers.size(), v2_);
  if (weight == weight_) return;
  // Where it cannot be written, the group keeps the weight it had.
  if (write_file(path_ + (v2_ ? "/cpu.weight" : "/cpu.shares"), std::to_string(weight)).ok())
    weight_ = weight;
}

}  // namespace kad::server::worker
