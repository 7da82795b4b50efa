#include "tests/support/pocl_ir.h"

#include <cstdio>
#include <filesystem>

namespace kad::testing {

std::string run_command(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  pclose(pipe);
  return out;
}

std::string pocl_kernel_ir(const std::string& llvm_dis, const std::string& pocl_cache,
                           const std::string& entry) {
  namespace fs = std::filesystem;
  for (const auto& e : fs::recursive_directory_iterator(pocl_cache)) {
    if (!e.is_directory() || e.path().filename() != entry) continue;
    const fs::path bitcode = e.path().parent_path() / "program.bc";
    if (!fs::exists(bitcode)) continue;
    const std::string ir = run_command(llvm_dis + " -o - " + bitcode.string() + " 2>/dev/null");
    const size_t start = ir.find("@" + entry + "(");
    if (start == std::string::npos) continue;
    return ir.substr(start, ir.find("\n}\n", start) - start);
  }
  return {};
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace kad::testing
