// The walls around a compiler that reads a client's code (DESIGN §8): on top
// of the child process and its limits (run_limited), the tool may read and
// execute only the toolchain's own files (system libraries, LLVM, libclc) and
// write only its work folder; where the kernel can, it also reaches no TCP
// port and cannot signal or connect (abstract sockets) to anything outside.
// Built on Landlock (Linux 5.13+), which needs no privilege. So
// `#include "/etc/shadow"` and any spelling that slipped past
// check_opencl_source finds nothing to read. kad's workers enter one too
// (server/worker/worker_confinement.h).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kad {

struct ToolSandbox {
  std::vector<std::string> readable;  // folders or files: read and execute
  std::vector<std::string> writable;  // folders: anything inside
};

// OK when this kernel can confine tools; else why not (the tools then run
// unconfined, behind check_opencl_source alone).
absl::Status tool_sandbox_support();

// What a sandbox walls off on this kernel: files (Landlock ABI 1), TCP bind
// and connect (ABI 4), signals to and abstract UNIX sockets of processes
// outside the sandbox (ABI 6). Every sandbox takes all that the kernel has.
struct SandboxReach {
  int landlock_abi = 0;
  bool files = false;
  bool tcp = false;
  bool signals_and_abstract_sockets = false;
};
SandboxReach sandbox_reach();

// A sandbox made ready in the parent (paths opened, rules added), so that the
// forked child only has to enter it: two system calls, safe after fork.
class PreparedSandbox {
 public:
  // A path that does not exist is skipped; an error only when confinement is
  // supported and failed.
  static absl::StatusOr<PreparedSandbox> prepare(const ToolSandbox& sandbox);
  PreparedSandbox(PreparedSandbox&& other) noexcept : ruleset_(other.ruleset_) {
    other.ruleset_ = -1;
  }
  PreparedSandbox& operator=(PreparedSandbox&&) = delete;
  ~PreparedSandbox();

  // In the child, before exec: no new privileges, then the rules. Returns
  // false (errno set) if it could not; a no-op without Landlock support.
  bool enter() const;
  bool confines() const { return ruleset_ >= 0; }

 private:
  explicit PreparedSandbox(int ruleset) : ruleset_(ruleset) {}
  int ruleset_ = -1;
};

}  // namespace kad
