#include "server/worker/worker_confinement.h"

#include <linux/capability.h>
#include <linux/magic.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/kernel_lowering.h"

namespace kad::server::worker {
namespace {

namespace fs = std::filesystem;

// System calls a worker never needs and a taken-over worker would use to
// reach past its walls: other processes' memory, the network (every socket;
// its own connection is already open), namespaces and mounts (to get out of
// Landlock's view), the kernel's own attack surface (modules, BPF, perf,
// keyrings, userfaultfd, io_uring, which also bypasses these filters), the
// clock and the machine, and opening files by handle rather than by path.
constexpr const char* kRefusedCalls[] = {
    "socket",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "pidfd_getfd",
    "kcmp",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "syslog",
    "name_to_handle_at",
    "open_by_handle_at",
    "iopl",
    "ioperm",
    "quotactl",
    "quotactl_fd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "fanotify_init",
    "lookup_dcookie",
    "vhangup",
    "uselib",
    "modify_ldt",
    // Signals by thread id alone (glibc raises with tgkill), and through a
    // pidfd, which names any process: see also signal_rules below.
    "tkill",
    "pidfd_send_signal",
};

// clone() flags that make namespaces; clone3 hides its flags in memory that a
// filter cannot read, so it is refused as unknown and glibc falls back to clone.
constexpr uint64_t kNamespaceFlags[] = {CLONE_NEWNS,  CLONE_NEWUSER, CLONE_NEWPID,   CLONE_NEWNET,
                                        CLONE_NEWIPC, CLONE_NEWUTS,  CLONE_NEWCGROUP};

int thread_count() {
  std::error_code ec;
  int n = 0;
  for (fs::directory_iterator it("/proc/self/task", ec), end; !ec && it != end; it.increment(ec))
    ++n;
  return n;
}

// No capability now or through any later exec: the bounding and ambient sets
// are emptied (the bounding set only where this process may, as root), and
// no exec may grant new privileges.
bool drop_capabilities() {
  for (int cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; ++cap) {
    prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);  // EPERM when not root: nothing to drop
  }
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct none[2]{};
  if (syscall(SYS_capset, &header, none) != 0) return false;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  __user_cap_data_struct now[2]{};
  if (syscall(SYS_capget, &header, now) != 0) return false;
  for (const auto& d : now)
    if (d.effective != 0 || d.permitted != 0 || d.inheritable != 0) return false;
  return true;
}

// Signals to the process that started the worker (kad), to its process
// group and to every process (kill(-1)). Landlock ABI 6 (Linux 6.12) scopes
// a worker's signals to its own walls; on older kernels (Debian 12's 6.1)
// these rules are what keeps a taken-over worker from killing or stopping
// kad. A pid is a 32-bit argument: the rules mask the register to its low
// 32 bits, all the kernel reads of it, whatever a caller puts in the upper
// ones. Other groups stay open: a worker ends a compiler it started by its
// group (toolchain.cc). (Another worker's pid is not known here: on such
// kernels a taken-over worker can still signal another session's worker,
// as the same user.)
int signal_rules(scmp_filter_ctx filter, pid_t daemon) {
  auto low_bits_are = [](pid_t pid) {
    return SCMP_A0_64(SCMP_CMP_MASKED_EQ, 0xffffffffu, static_cast<uint32_t>(pid));
  };
  // In a PID namespace of its own, kad is no pid the worker can name (its
  // parent is 0 there); kill(-1) still reaches only what it started.
  if (daemon == 0) {
    return seccomp_rule_add(filter, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(kill), 1, low_bits_are(-1));
  }
  int rc = 0;
  for (const int call :
       {SCMP_SYS(kill), SCMP_SYS(tgkill), SCMP_SYS(rt_sigqueueinfo), SCMP_SYS(rt_tgsigqueueinfo)}) {
    if (rc == 0)
      rc = seccomp_rule_add(filter, SCMP_ACT_ERRNO(EPERM), call, 1, low_bits_are(daemon));
  }
  const pid_t group = getpgid(daemon);
  for (const pid_t pid : {pid_t{-1}, -daemon, group > 0 ? -group : pid_t{-1}}) {
    if (rc == 0)
      rc = seccomp_rule_add(filter, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(kill), 1, low_bits_are(pid));
  }
  return rc;
}

}  // namespace

absl::Status confine_system_calls() {
  scmp_filter_ctx filter = seccomp_init(SCMP_ACT_ALLOW);
  if (filter == nullptr) return absl::InternalError("cannot make a seccomp filter");
  int rc = 0;
  for (const char* name : kRefusedCalls) {
    const int call = seccomp_syscall_resolve_name(name);
    if (call == __NR_SCMP_ERROR) continue;  // not a call on this architecture
    if ((rc = seccomp_rule_add(filter, SCMP_ACT_ERRNO(EPERM), call, 0)) != 0) break;
  }
  if (rc == 0) rc = signal_rules(filter, getppid());
  if (rc == 0) rc = seccomp_rule_add(filter, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  for (const uint64_t flag : kNamespaceFlags) {
    if (rc != 0) break;
    rc = seccomp_rule_add(filter, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
  }
  if (rc == 0) rc = seccomp_load(filter);
  seccomp_release(filter);
  if (rc != 0) {
    return absl::InternalError(
        absl::StrFormat("cannot load the worker's seccomp filter: %s", std::strerror(-rc)));
  }
  return absl::OkStatus();
}

std::string describe_walls(uint32_t walls, int landlock_abi) {
  struct Named {
    uint32_t bit;
    const char* name;
  };
  constexpr Named kNames[] = {{kWallFiles, "files"},
                              {kWallTcp, "TCP"},
                              {kWallSignalsAndAbstractSockets, "signals and abstract sockets"},
                              {kWallNoCapabilities, "capabilities"},
                              {kWallSeccomp, "system calls"},
                              {kWallOwnProcesses, "own PID namespace"},
                              {kWallProcessLimit, "process limit"},
                              {kWallFolderSize, "folder size"},
                              {kWallMemoryLimit, "memory limit"}};
  constexpr uint32_t kLandlockWalls = kWallFiles | kWallTcp | kWallSignalsAndAbstractSockets;
  std::vector<std::string> held, missing;
  for (const Named& n : kNames) ((walls & n.bit) != 0 ? held : missing).push_back(n.name);
  std::string text = held.empty() ? "none" : absl::StrJoin(held, ", ");
  if (!missing.empty()) {
    absl::StrAppendFormat(&text, "; not: %s", absl::StrJoin(missing, ", "));
    if ((~walls & kLandlockWalls) != 0)
      absl::StrAppendFormat(&text, " (Landlock ABI %d)", landlock_abi);
  }
  return text;
}

ToolSandbox worker_sandbox(const std::string& worker_dir) {
  ToolSandbox sandbox;
  // The loader, the driver and the toolchain; of /etc only what they read.
  sandbox.readable = {"/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "/etc/OpenCL"};
  // What the driver learns the machine from (cores, caches, memory, cgroup
  // limits), and the worker's own /proc entry, never another process's.
  for (const char* entry : {"/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/self",
                            "/sys/devices/system", "/sys/fs/cgroup"}) {
    sandbox.readable.push_back(entry);
  }
  KernelLowering& lowering = KernelLowering::shared();
  for (std::string& f : lowering.toolchain_files()) sandbox.readable.push_back(std::move(f));

  // Nothing of kad's code cache, which holds every tenant's code: the daemon
  // lowers each kernel (Device::lower_ahead) and sends the code with the
  // compile request; the worker keeps it in a cache in its own folder.
  sandbox.writable = {"/dev/null"};
  // Its own folder holds its driver's cache too (keep_driver_caches_in):
  // no cache a worker writes is read by another.
  if (!worker_dir.empty()) sandbox.writable.push_back(worker_dir);
  return sandbox;
}

// Whether `folder` is a tmpfs mounted there (by namespaced_spawn, with a
// size): not a folder of the disk or of a tmpfs that holds others' too.
bool folder_of_its_own(const std::string& folder) {
  struct statfs fs {};
  struct stat here {
  }, above{};
  return !folder.empty() && statfs(folder.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC &&
         stat(folder.c_str(), &here) == 0 && stat((folder + "/..").c_str(), &above) == 0 &&
         here.st_dev != above.st_dev;
}

absl::StatusOr<Confinement> confine_worker(const ToolSandbox& sandbox, const std::string& folder) {
  if (const int threads = thread_count(); threads != 1) {
    return absl::FailedPreconditionError(
        absl::StrFormat("a worker must be confined before it starts threads; it has %d", threads));
  }
  Confinement out;
  if (folder_of_its_own(folder)) out.walls |= kWallFolderSize;
  // Set before its exec, hard and soft: it has no capability to raise it.
  if (rlimit data{}; getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_max != RLIM_INFINITY)
    out.walls |= kWallMemoryLimit;
  if (drop_capabilities()) out.walls |= kWallNoCapabilities;

  const SandboxReach reach = sandbox_reach();
  out.landlock_abi = reach.landlock_abi;
  absl::StatusOr<PreparedSandbox> walls = PreparedSandbox::prepare(sandbox);
  if (!walls.ok()) return walls.status();
  if (walls->confines()) {
    if (!walls->enter()) {
      return absl::InternalError(
          absl::StrFormat("cannot enter the worker's Landlock sandbox: %s", std::strerror(errno)));
    }
    if (reach.files) out.walls |= kWallFiles;
    if (reach.tcp) out.walls |= kWallTcp;
    if (reach.signals_and_abstract_sockets) out.walls |= kWallSignalsAndAbstractSockets;
  }

  if (absl::Status s = confine_system_calls(); !s.ok()) return s;
  out.walls |= kWallSeccomp;
  // PID 1 is the first process of a PID namespace: kad started it in one of
  // its own (kad itself may be PID 1 of a container, but never a worker).
  if (getpid() == 1) {
    out.walls |= kWallOwnProcesses;
    // Its user namespace came with the PID namespace: the limit counts the
    // processes of this worker alone.
    rlimit processes{};
    if (getrlimit(RLIMIT_NPROC, &processes) == 0 && processes.rlim_max != RLIM_INFINITY)
      out.walls |= kWallProcessLimit;
  }
  return out;
}

}  // namespace kad::server::worker
