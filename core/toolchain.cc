#include "core/toolchain.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kad {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxToolOutput = 64 << 10;  // what a tool may print that we keep

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A temporary folder for one lowering, removed when done.
struct WorkDir {
  fs::path path;
  WorkDir() {
    char tmpl[] = "/tmp/kad-toolchain-XXXXXX";
    if (mkdtemp(tmpl) != nullptr) path = tmpl;
  }
  ~WorkDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

}  // namespace

absl::string_view code_target_name(CodeTarget target) {
  switch (target) {
    case CodeTarget::kPtx: return "PTX";
    case CodeTarget::kSpirv: return "SPIR-V";
    case CodeTarget::kAmdgcn: return "AMDGCN code object";
  }
  return "unknown";
}

absl::StatusOr<ToolRun> run_limited(const std::vector<std::string>& argv,
                                    const ToolchainLimits& limits) {
  int out[2];
  if (argv.empty() || pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("cannot start a tool");
  const pid_t pid = fork();
  if (pid < 0) return absl::ResourceExhaustedError("cannot fork a tool process");
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(out[1], 2);
    rlimit as{limits.memory_bytes, limits.memory_bytes};
    rlimit fsize{limits.output_bytes, limits.output_bytes};
    const rlim_t cpu = static_cast<rlim_t>(limits.seconds) + 1;
    rlimit cpu_limit{cpu, cpu};
    setrlimit(RLIMIT_AS, &as);
    setrlimit(RLIMIT_FSIZE, &fsize);
    setrlimit(RLIMIT_CPU, &cpu_limit);
    setpgid(0, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  ToolRun run;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limits.seconds);
  bool timed_out = false;
  char buffer[4096];
  for (;;) {
    pollfd p{out[0], POLLIN, 0};
    const int ready = poll(&p, 1, 50);
    if (ready > 0) {
      const ssize_t n = read(out[0], buffer, sizeof(buffer));
      if (n > 0) {
        if (run.output.size() < kMaxToolOutput)
          run.output.append(buffer, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) break;  // the tool closed its output: it is ending
    }
    if (std::chrono::steady_clock::now() > deadline) {
      timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
  }
  close(out[0]);
  int status = 0;
  for (;;) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    if (std::chrono::steady_clock::now() > deadline + std::chrono::seconds(1)) {
      timed_out = true;
      kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "%s did not finish within %d s and was stopped", argv[0], limits.seconds));
  }
  if (WIFSIGNALED(status)) {
    run.signal = WTERMSIG(status);
    if (run.signal == SIGXFSZ) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "%s wrote more than the limit of %d bytes", argv[0], limits.output_bytes));
    }
    if (run.signal == SIGXCPU) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "%s used more than %d s of CPU time", argv[0], limits.seconds));
    }
  } else {
    run.exit_code = WEXITSTATUS(status);
  }
  return run;
}

absl::StatusOr<Toolchain> Toolchain::find() {
  Toolchain t;
  const char* bin = std::getenv("KAD_LLVM_BIN");
  t.bin_ = bin && *bin ? bin : "/usr/lib/llvm-15/bin";
  t.clang_ = t.bin_ + "/clang";
  t.llvm_link_ = t.bin_ + "/llvm-link";
  t.llc_ = t.bin_ + "/llc";
  t.lld_ = t.bin_ + "/ld.lld";
  t.llvm_spirv_ = fs::exists(t.bin_ + "/llvm-spirv") ? t.bin_ + "/llvm-spirv" : "/usr/bin/llvm-spirv-15";
  t.libclc_ = "/usr/lib/clc";
  for (const std::string& tool : {t.clang_, t.llvm_link_, t.llc_, t.lld_, t.llvm_spirv_}) {
    if (!fs::exists(tool)) {
      return absl::NotFoundError(absl::StrCat(
          "toolchain: ", tool, " is missing (install clang-15, llvm-15, lld-15, llvm-spirv-15)"));
    }
  }
  if (!fs::exists(t.libclc_ + "/nvptx64--nvidiacl.bc")) {
    return absl::NotFoundError("toolchain: libclc is missing (install libclc-15)");
  }
  absl::StatusOr<ToolRun> v = run_limited({t.clang_, "--version"}, ToolchainLimits{});
  if (!v.ok()) return v.status();
  t.version_ = v->output.substr(0, v->output.find('\n'));
  return t;
}

absl::StatusOr<std::string> Toolchain::lower(CodeTarget target, absl::string_view source,
                                             absl::string_view cpu, absl::string_view options,
                                             const ToolchainLimits& limits) const {
  WorkDir dir;
  if (dir.path.empty()) return absl::InternalError("toolchain: no temporary folder");
  const std::string src = (dir.path / "kernel.cl").string();
  std::ofstream(src, std::ios::binary) << source;
  const std::string bc = (dir.path / "kernel.bc").string();
  const std::string linked = (dir.path / "linked.bc").string();
  const std::string result = (dir.path / "kernel.out").string();

  std::vector<std::string> front = {clang_, "-x", "cl", "-cl-std=CL1.2", "-Xclang",
                                    "-finclude-default-header", "-O3", "-emit-llvm", "-c"};
  std::vector<std::vector<std::string>> steps;
  switch (target) {
    case CodeTarget::kPtx:
      front.insert(front.end(), {"-target", "nvptx64-nvidia-cuda", absl::StrCat("-march=", cpu)});
      steps.push_back({llvm_link_, "--only-needed", "--suppress-warnings", bc,
                       libclc_ + "/nvptx64--nvidiacl.bc", "-o", linked});
      steps.push_back({llc_, "-march=nvptx64", absl::StrCat("-mcpu=", cpu), "-O3", linked, "-o",
                       result});
      break;
    case CodeTarget::kSpirv:
      // llvm-spirv 15 cannot translate what LLVM's optimiser emits (`freeze`);
      // the consuming driver optimises the SPIR-V anyway.
      front.insert(front.end(), {"-target", "spir64", "-Xclang", "-disable-llvm-passes"});
      steps.push_back({llvm_spirv_, bc, "-o", result});
      break;
    case CodeTarget::kAmdgcn:
      front.insert(front.end(),
                   {"-target", "amdgcn-amd-amdhsa", absl::StrCat("-mcpu=", cpu), "-nogpulib"});
      steps.push_back({llvm_link_, "--only-needed", "--suppress-warnings", bc,
                       libclc_ + "/amdgcn--amdhsa.bc", "-o", linked});
      steps.push_back({llc_, "-march=amdgcn", absl::StrCat("-mcpu=", cpu), "-O3",
                       "-filetype=obj", linked, "-o", result + ".o"});
      steps.push_back({lld_, "-shared", result + ".o", "-o", result});
      break;
  }
  for (absl::string_view option : absl::StrSplit(options, ' ', absl::SkipEmpty()))
    front.push_back(std::string(option));
  front.insert(front.end(), {src, "-o", bc});
  steps.insert(steps.begin(), front);

  for (const auto& step : steps) {
    absl::StatusOr<ToolRun> run = run_limited(step, limits);
    if (!run.ok()) return run.status();
    if (run->signal != 0) {
      return absl::InternalError(absl::StrFormat(
          "%s crashed (signal %d) lowering to %s:\n%s", fs::path(step[0]).filename().string(),
          run->signal, code_target_name(target), run->output));
    }
    if (run->exit_code != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s failed lowering to %s (exit %d):\n%s", fs::path(step[0]).filename().string(),
          code_target_name(target), run->exit_code, run->output));
    }
  }
  return read_file(result);
}

}  // namespace kad
