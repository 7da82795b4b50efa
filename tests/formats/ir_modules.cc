#include "tests/formats/ir_modules.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/specialization.h"
#include "core/toolchain.h"

namespace kad::testing {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::Status run_tool(const std::vector<std::string>& argv) {
  absl::StatusOr<ToolRun> run = run_limited(argv, {});
  if (!run.ok()) return run.status();
  if (run->exit_code != 0 || run->signal != 0) {
    return absl::InternalError(absl::StrCat("`", absl::StrJoin(argv, " "), "` failed (exit ",
                                            run->exit_code, ", signal ", run->signal, "):\n",
                                            run->output));
  }
  return absl::OkStatus();
}

// `linked`: against the prelude's linked form; else `source` is the whole program.
absl::StatusOr<std::string> build(const std::string& source, ModuleFormat format, bool linked,
                                  const std::vector<std::string>& flags) {
  char tmpl[] = "/tmp/kad-formats-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("no temporary folder");
  const fs::path dir = tmpl;
  std::ofstream(dir / "kad_prelude.cl", std::ios::binary) << prelude_source();
  std::ofstream(dir / "kernel.cl", std::ios::binary) << source;
  const std::string bc = (dir / "kernel.bc").string(), spv = (dir / "kernel.spv").string();
  std::vector<std::string> clang = {
      llvm_tool("clang"), "-x",     "cl",      "-cl-std=CL1.2",
      "-target",          "spir64", "-Xclang", "-finclude-default-header"};
  if (linked) {
    clang.insert(clang.end(),
                 {"-DKAD_LINKED_SPECIALIZATION", "-include", (dir / "kad_prelude.cl").string()});
  }
  clang.insert(clang.end(), flags.begin(), flags.end());
  clang.insert(clang.end(), {"-emit-llvm", "-c", (dir / "kernel.cl").string(), "-o", bc});
  absl::Status s = run_tool(clang);
  if (s.ok() && format == ModuleFormat::kSpirv)
    s = run_tool({llvm_tool("llvm-spirv"), bc, "-o", spv});
  std::string out = s.ok() ? read_all(format == ModuleFormat::kSpirv ? spv : bc) : "";
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!s.ok()) return s;
  return out;
}

}  // namespace

std::string llvm_tool(const std::string& name) {
  const char* bin = std::getenv("KAD_LLVM_BIN");
  const std::string folder = bin && *bin ? bin : "/usr/lib/llvm-15/bin";
  if (name == "llvm-spirv" && !fs::exists(folder + "/llvm-spirv")) return "/usr/bin/llvm-spirv-15";
  return folder + "/" + name;
}

absl::StatusOr<std::string> build_linked_ir(const std::string& kernel_source, ModuleFormat format,
                                            const std::vector<std::string>& clang_flags) {
  return build(kernel_source, format, true, clang_flags);
}

absl::StatusOr<std::string> build_plain_ir(const std::string& program, ModuleFormat format) {
  return build(program, format, false, {"-Xclang", "-disable-llvm-passes"});
}

}  // namespace kad::testing
