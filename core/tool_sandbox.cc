#include "core/tool_sandbox.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

// Landlock ABI 3 (Linux 6.2), newer than Debian 12's headers: the kernel's value.
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif

namespace kad {
namespace {

// The rights of Landlock ABIs 4 (Linux 6.7: TCP) and 6 (Linux 6.12: scopes),
// with the kernel's values; Debian 12's headers know neither.
constexpr uint64_t kNetBindTcp = 1ULL << 0;
constexpr uint64_t kNetConnectTcp = 1ULL << 1;
constexpr uint64_t kScopeAbstractUnixSocket = 1ULL << 0;
constexpr uint64_t kScopeSignal = 1ULL << 1;

// landlock_ruleset_attr as of ABI 6; older kernels take the leading fields.
struct RulesetAttr {
  uint64_t handled_access_fs = 0;
  uint64_t handled_access_net = 0;
  uint64_t scoped = 0;
};

int landlock_abi() {
  static const int abi = [] {
    const long v =
        syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return v < 0 ? -errno : static_cast<int>(v);
  }();
  return abi;
}

constexpr uint64_t kFileRights =
    LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE;

// Every right this kernel's Landlock knows: whatever is not granted is denied.
uint64_t handled_rights(int abi) {
  uint64_t rights = kFileRights | LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                    LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
                    LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                    LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
                    LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
  if (abi >= 2) rights |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
  return rights;
}

absl::Status add_rule(int ruleset, const std::string& path, uint64_t rights) {
  const int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return absl::OkStatus();  // nothing there to allow
  struct stat st {};
  if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) {
    rights &= kFileRights | LANDLOCK_ACCESS_FS_TRUNCATE;  // a file takes file rights only
  }
  landlock_path_beneath_attr rule{};
  rule.allowed_access = rights;
  rule.parent_fd = fd;
  const long r = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
  const int error = errno;
  close(fd);
  if (r != 0) {
    return absl::InternalError(
        absl::StrFormat("cannot allow `%s` to tools: %s", path, std::strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status tool_sandbox_support() {
  const int abi = landlock_abi();
  if (abi >= 1) return absl::OkStatus();
  return absl::UnimplementedError(
      absl::StrFormat("this kernel cannot confine compilers to their own files (Landlock: %s)",
                      -abi == EOPNOTSUPP ? "disabled at boot" : std::strerror(-abi)));
}

SandboxReach sandbox_reach() {
  const int abi = landlock_abi();
  return {.landlock_abi = std::max(abi, 0),
          .files = abi >= 1,
          .tcp = abi >= 4,
          .signals_and_abstract_sockets = abi >= 6};
}

absl::StatusOr<PreparedSandbox> PreparedSandbox::prepare(const ToolSandbox& sandbox) {
  const int abi = landlock_abi();
  if (abi < 1) return PreparedSandbox(-1);
  const uint64_t rights = handled_rights(abi);
  // Files as the rules below allow; no TCP at all and, past the sandbox, no
  // signal and no abstract UNIX socket: what runs inside can reach neither
  // the network nor another process of kad's user.
  RulesetAttr attr;
  attr.handled_access_fs = rights;
  size_t attr_size = sizeof(uint64_t);
  if (abi >= 4) {
    attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
    attr_size = 2 * sizeof(uint64_t);
  }
  if (abi >= 6) {
    attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
    attr_size = sizeof(RulesetAttr);
  }
  const long ruleset = syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
  if (ruleset < 0) {
    return absl::InternalError(
        absl::StrFormat("cannot create a tool sandbox: %s", std::strerror(errno)));
  }
  PreparedSandbox prepared(static_cast<int>(ruleset));
  const uint64_t read =
      LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
  for (const std::string& path : sandbox.readable)
    if (absl::Status s = add_rule(prepared.ruleset_, path, read); !s.ok()) return s;
  for (const std::string& path : sandbox.writable)
    if (absl::Status s = add_rule(prepared.ruleset_, path, rights); !s.ok()) return s;
  return prepared;
}

PreparedSandbox::~PreparedSandbox() {
  if (ruleset_ >= 0) close(ruleset_);
}

bool PreparedSandbox::enter() const {
  if (ruleset_ < 0) return true;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return syscall(SYS_landlock_restrict_self, ruleset_, 0) == 0;
}

}  // namespace kad
