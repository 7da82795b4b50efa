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
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "core/ir_checks.h"
#include "core/specialization.h"

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
  // Under $TMPDIR: a kad worker points it at its own folder, the only one
  // it may write besides the caches.
  WorkDir() {
    std::error_code ec;
    fs::path base = fs::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string tmpl = (base / "kad-toolchain-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path = tmpl;
  }
  ~WorkDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

// Runs `steps` in order under `limits`; the first that crashes or fails ends
// the lowering with its output. `what` says what was being done ("lowering to
// PTX").
absl::Status run_steps(const std::vector<std::vector<std::string>>& steps,
                       const ToolchainLimits& limits, const ToolSandbox& sandbox,
                       absl::string_view what) {
  for (const auto& step : steps) {
    absl::StatusOr<ToolRun> run = run_limited(step, limits, &sandbox);
    if (!run.ok()) return run.status();
    // The client sees its own file names (`kernel.cl:3:30`), not the
    // daemon's work folder.
    for (const std::string& folder : sandbox.writable)
      absl::StrReplaceAll({{folder + "/", ""}}, &run->output);
    // Every tool here reads the client's code: a crash is that input's
    // doing (or a tool's bug it found), and the client's to see.
    if (run->signal != 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s crashed (signal %d, %s) %s: the module cannot be lowered:\n%s",
                          fs::path(step[0]).filename().string(), run->signal,
                          strsignal(run->signal), what, run->output));
    }
    if (run->exit_code != 0) {
      return absl::InvalidArgumentError(absl::StrFormat("%s failed %s (exit %d):\n%s",
                                                        fs::path(step[0]).filename().string(), what,
                                                        run->exit_code, run->output));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view code_target_name(CodeTarget target) {
  switch (target) {
    case CodeTarget::kPtx:
      return "PTX";
    case CodeTarget::kSpirv:
      return "SPIR-V";
    case CodeTarget::kAmdgcn:
      return "AMDGCN code object";
    case CodeTarget::kSpir:
      return "SPIR bitcode";
  }
  return "unknown";
}

absl::StatusOr<ToolRun> run_limited(const std::vector<std::string>& argv,
                                    const ToolchainLimits& limits, const ToolSandbox* sandbox) {
  std::optional<PreparedSandbox> walls;
  if (sandbox != nullptr) {
    absl::StatusOr<PreparedSandbox> prepared = PreparedSandbox::prepare(*sandbox);
    if (!prepared.ok()) return prepared.status();
    walls.emplace(*std::move(prepared));
  }
  const bool confined = walls && walls->confines();
  // Prepared before fork: the child may only make system calls.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
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
    if (confined && !walls->enter()) {
      static constexpr char kCannot[] = "kad: cannot enter the tool sandbox\n";
      (void)!write(2, kCannot, sizeof(kCannot) - 1);
      _exit(126);
    }
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
        if (run.output.size() < kMaxToolOutput) run.output.append(buffer, static_cast<size_t>(n));
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
    return absl::DeadlineExceededError(
        absl::StrFormat("%s did not finish within %d s and was stopped", argv[0], limits.seconds));
  }
  if (WIFSIGNALED(status)) {
    run.signal = WTERMSIG(status);
    if (run.signal == SIGXFSZ) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "%s wrote more than the limit of %d bytes", argv[0], limits.output_bytes));
    }
    if (run.signal == SIGXCPU) {
      return absl::DeadlineExceededError(
          absl::StrFormat("%s used more than %d s of CPU time", argv[0], limits.seconds));
    }
  } else {
    run.exit_code = WEXITSTATUS(status);
  }
  return run;
}

absl::StatusOr<Toolchain> Toolchain::find(absl::string_view known_version) {
  Toolchain t;
  const char* bin = std::getenv("KAD_LLVM_BIN");
  t.bin_ = bin && *bin ? bin : "/usr/lib/llvm-15/bin";
  t.clang_ = t.bin_ + "/clang";
  t.llvm_link_ = t.bin_ + "/llvm-link";
  t.llc_ = t.bin_ + "/llc";
  t.llvm_nm_ = t.bin_ + "/llvm-nm";
  t.opt_ = t.bin_ + "/opt";
  t.lld_ = t.bin_ + "/ld.lld";
  t.llvm_spirv_ =
      fs::exists(t.bin_ + "/llvm-spirv") ? t.bin_ + "/llvm-spirv" : "/usr/bin/llvm-spirv-15";
  t.libclc_ = "/usr/lib/clc";
  for (const std::string& tool :
       {t.clang_, t.llvm_link_, t.llc_, t.lld_, t.llvm_spirv_, t.llvm_nm_, t.opt_}) {
    if (!fs::exists(tool)) {
      return absl::NotFoundError(absl::StrCat(
          "toolchain: ", tool, " is missing (install clang-15, llvm-15, lld-15, llvm-spirv-15)"));
    }
  }
  if (!fs::exists(t.libclc_ + "/nvptx64--nvidiacl.bc")) {
    return absl::NotFoundError("toolchain: libclc is missing (install libclc-15)");
  }
  // What every tool may read: system libraries, LLVM, libclc, and nothing of
  // the host's own (no /etc but the loader's cache, no /home, no /proc).
  t.readable_ = {"/usr",
                 "/lib",
                 "/lib64",
                 "/bin",
                 "/etc/ld.so.cache",
                 "/dev/null",
                 t.bin_,
                 fs::path(t.bin_).parent_path().string(),
                 t.libclc_};
  if (!known_version.empty()) {
    t.version_ = std::string(known_version);
    return t;
  }
  absl::StatusOr<ToolRun> v = run_limited({t.clang_, "--version"}, ToolchainLimits{});
  if (!v.ok()) return v.status();
  t.version_ = v->output.substr(0, v->output.find('\n'));
  return t;
}

ToolSandbox Toolchain::sandbox_for(const std::string& workdir) const {
  return ToolSandbox{readable_, {workdir, "/dev/null"}};
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
  const std::string optimised = (dir.path / "optimised.bc").string();
  const std::string result = (dir.path / "kernel.out").string();

  std::vector<std::string> front = {clang_,          "-x",         "cl",
                                    "-cl-std=CL1.2", "-Xclang",    "-finclude-default-header",
                                    "-O3",           "-emit-llvm", "-c"};
  std::vector<std::vector<std::string>> steps;
  switch (target) {
    case CodeTarget::kPtx:
      front.insert(front.end(), {"-target", "nvptx64-nvidia-cuda", absl::StrCat("-march=", cpu)});
      steps.push_back({llvm_link_, "--only-needed", "--suppress-warnings", bc,
                       libclc_ + "/nvptx64--nvidiacl.bc", "-o", linked});
      // Once more after linking: libclc's built-ins (get_local_id, vload_half)
      // are inlined and folded into the kernel instead of staying calls.
      steps.push_back({opt_, "-O3", linked, "-o", optimised});
      steps.push_back(
          {llc_, "-march=nvptx64", absl::StrCat("-mcpu=", cpu), "-O3", optimised, "-o", result});
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
      steps.push_back({opt_, "-O3", linked, "-o", optimised});  // as for PTX
      steps.push_back({llc_, "-march=amdgcn", absl::StrCat("-mcpu=", cpu), "-O3", "-filetype=obj",
                       optimised, "-o", result + ".o"});
      steps.push_back({lld_, "-shared", result + ".o", "-o", result});
      break;
    case CodeTarget::kSpir:
      // SPIR 1.2 is spir64 bitcode, optimised here as for IR modules
      // (lower_ir): the specialisation's constants are folded before the
      // driver (PoCL's cl_khr_spir) builds its work-group functions. The
      // argument names go with it: the driver reflects the parameters from them.
      front.insert(front.end(),
                   {"-target", "spir64", "-Xclang", "-disable-llvm-passes", "-cl-kernel-arg-info"});
      steps.push_back({opt_, "-O2", bc, "-o", result});
      // Its text, to look for inline assembly that macros may have spelt
      // past check_opencl_source (`as##m`): PoCL would run it as host code.
      steps.push_back({opt_, "-S", result, "-o", result + ".ll"});
      break;
  }
  for (absl::string_view option : absl::StrSplit(options, ' ', absl::SkipEmpty()))
    front.push_back(std::string(option));
  front.insert(front.end(), {src, "-o", bc});
  steps.insert(steps.begin(), front);

  if (absl::Status s = run_steps(steps, limits, sandbox_for(dir.path.string()),
                                 absl::StrCat("lowering to ", code_target_name(target)));
      !s.ok()) {
    return s;
  }
  if (target == CodeTarget::kSpir) {
    if (absl::Status s = check_no_inline_assembly("OpenCL C", read_file(result + ".ll")); !s.ok())
      return s;
  }
  return read_file(result);
}

absl::Status Toolchain::verify_ir(ModuleFormat format, absl::string_view module,
                                  const ToolchainLimits& limits) const {
  const absl::string_view format_name = module_format_name(format);
  if (format != ModuleFormat::kSpirv && format != ModuleFormat::kLlvmBitcodeSpir64) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "verify_ir takes SPIR-V or LLVM bitcode (spir64) modules, not %s", format_name));
  }
  WorkDir dir;
  if (dir.path.empty()) return absl::InternalError("toolchain: no temporary folder");
  const std::string submitted =
      (dir.path / (format == ModuleFormat::kSpirv ? "module.spv" : "module.bc")).string();
  const std::string bc = (dir.path / "module.bc").string();
  const std::string text = (dir.path / "module.ll").string();
  std::ofstream(submitted, std::ios::binary) << module;
  const std::string what = absl::StrFormat("verifying a %s module", format_name);
  std::vector<std::vector<std::string>> steps;
  if (format == ModuleFormat::kSpirv) steps.push_back({llvm_spirv_, "-r", submitted, "-o", bc});
  // opt verifies the module it reads before anything else; -S prints it.
  steps.push_back({opt_, "-S", bc, "-o", text});
  if (absl::Status s = run_steps(steps, limits, sandbox_for(dir.path.string()), what); !s.ok())
    return s;
  const std::string ir = read_file(text);
  if (absl::Status s = check_no_inline_assembly(format_name, ir); !s.ok()) return s;
  return check_kernel_metadata(format_name, ir);
}

absl::StatusOr<std::string> Toolchain::lower_ir(CodeTarget target, ModuleFormat format,
                                                absl::string_view module,
                                                absl::string_view specialization,
                                                absl::string_view cpu, absl::string_view options,
                                                const ToolchainLimits& limits) const {
  (void)cpu;
  // SPIR bitcode and SPIR-V are consumed by drivers that compile them with
  // their own options (clBuildProgram, zeModuleCreate): `options` are theirs.
  (void)options;
  const absl::string_view format_name = module_format_name(format);
  if (format != ModuleFormat::kSpirv && format != ModuleFormat::kLlvmBitcodeSpir64) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "lower_ir takes SPIR-V or LLVM bitcode (spir64) modules, not %s", format_name));
  }
  if (target == CodeTarget::kPtx || target == CodeTarget::kAmdgcn) {
    // Retargeting SPIR to NVPTX or AMDGPU means rewriting address spaces
    // (SPIR's constant space is 2, NVPTX's and AMDGPU's 4; AMDGPU's private
    // space is 5, SPIR's 0), the intrinsics named after them, the calling
    // conventions and how kernels take aggregates: no tool here does that.
    return absl::UnimplementedError(absl::StrFormat(
        "a %s module cannot be lowered to %s yet: the module is spir64 IR, and no tool of kad's "
        "toolchain (LLVM 15) retargets it soundly (SPIR's address spaces differ from %s's: "
        "constant is 2 in SPIR and 4 there%s); submit the kernel as OpenCL C for this device",
        format_name, code_target_name(target), target == CodeTarget::kPtx ? "NVPTX" : "AMDGPU",
        target == CodeTarget::kAmdgcn ? ", private is 0 in SPIR and 5 there" : ""));
  }
  const std::string what =
      absl::StrFormat("lowering a %s module to %s", format_name, code_target_name(target));

  WorkDir dir;
  if (dir.path.empty()) return absl::InternalError("toolchain: no temporary folder");
  const std::string submitted =
      (dir.path / (format == ModuleFormat::kSpirv ? "module.spv" : "module.bc")).string();
  const std::string bc = (dir.path / "module.bc").string();
  const std::string spec_src = (dir.path / "specialization.cl").string();
  const std::string spec_bc = (dir.path / "specialization.bc").string();
  const std::string linked = (dir.path / "linked.bc").string();
  const std::string result = (dir.path / "kernel.out").string();
  const ToolSandbox sandbox = sandbox_for(dir.path.string());
  std::ofstream(submitted, std::ios::binary) << module;
  std::ofstream(spec_src, std::ios::binary)
      << specialization << "#define KAD_SPECIALIZATION_MODULE 1\n"
      << prelude_source();

  // 1. The module as spir64 bitcode.
  if (format == ModuleFormat::kSpirv) {
    if (absl::Status s = run_steps({{llvm_spirv_, "-r", submitted, "-o", bc}}, limits,
                                   sandbox_for(dir.path.string()), what);
        !s.ok()) {
      return s;
    }
  }
  // 2. It must be built against the linked prelude: a module built against
  //    the source form has one launch shape baked in, and would run any other
  //    launch wrongly.
  absl::StatusOr<ToolRun> symbols = run_limited({llvm_nm_, bc}, limits, &sandbox);
  if (!symbols.ok()) return symbols.status();
  if (symbols->exit_code != 0 || symbols->signal != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s module is not readable LLVM IR (llvm-nm exit %d, signal %d):\n%s",
                        format_name, symbols->exit_code, symbols->signal, symbols->output));
  }
  bool marked = false;
  for (absl::string_view line : absl::StrSplit(symbols->output, '\n')) {
    marked = marked || absl::EndsWith(line, " __kad_linked_prelude_v1");
  }
  if (!marked) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s module was not built against kad's linked prelude (it has no "
        "__kad_linked_prelude_v1): build it with -DKAD_LINKED_SPECIALIZATION -include "
        "kad/kad_prelude.cl, so that kad can link in each launch's specialisation",
        format_name));
  }
  // 3. The specialisation module, linked in; then the target's form.
  std::vector<std::vector<std::string>> steps = {
      {clang_, "-x", "cl", "-cl-std=CL1.2", "-Xclang", "-finclude-default-header", "-target",
       "spir64", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c", spec_src, "-o", spec_bc}};
  if (absl::Status s = run_steps(steps, limits, sandbox, what); !s.ok()) return s;
  absl::StatusOr<ToolRun> link =
      run_limited({llvm_link_, bc, spec_bc, "-o", linked}, limits, &sandbox);
  if (!link.ok()) return link.status();
  if (link->exit_code != 0 || link->signal != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("llvm-link failed %s (exit %d, signal %d):\n%s", what, link->exit_code,
                        link->signal, link->output));
  }
  if (absl::StrContains(link->output, "different target triples")) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s module is not spir64 IR, %s:\n%s", format_name, what, link->output));
  }
  // SPIR bitcode: optimised here, so that the specialisation is inlined and
  // folded in what kad hands over (PoCL optimises what it gets as well).
  // SPIR-V: llvm-spirv 15 cannot take the optimiser's `freeze`, so nothing
  // here optimises; the driver that consumes the SPIR-V does.
  steps = target == CodeTarget::kSpir
              ? std::vector<std::vector<std::string>>{{opt_, "-O2", linked, "-o", result}}
              : std::vector<std::vector<std::string>>{{llvm_spirv_, linked, "-o", result}};
  if (absl::Status s = run_steps(steps, limits, sandbox, what); !s.ok()) return s;
  return read_file(result);
}

}  // namespace kad
