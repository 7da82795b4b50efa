#include "tests/fuzz/api_fuzz_kernels.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/daemon.h"

namespace kad::api_fuzz {
namespace {

using Space = Parameter::Space;

Parameter global(bool is_const = false) { return {Space::kGlobal, is_const}; }
Parameter local() { return {Space::kLocal}; }
Parameter scalar(v1::ScalarType type) { return {Space::kPrivate, false, type}; }
Parameter element_count() { return {Space::kPrivate, false, v1::SCALAR_TYPE_U32, true}; }

// Every kernel that writes guards its index with an element count, so that a
// launch larger than its buffers stays inside them.
constexpr char kKernels[] = R"(
kernel void noop(KAD_CONTEXT) {}

kernel void many_args(KAD_CONTEXT, global int* a, global const float* b, char c, ushort s,
                      long l, local float* scratch, float f, uint u) {}

kernel void fill(KAD_CONTEXT, global int* out, uint n, int v) {
  const ulong i = (ulong)kad_global_linear();
  if (kad_active() && i < (ulong)n) out[i] = v;
}

kernel void saxpy(KAD_CONTEXT, global float* y, global const float* x, float a, uint n) {
  const ulong i = (ulong)kad_global_linear();
  if (kad_active() && i < (ulong)n) y[i] = a * x[i] + y[i];
}
)";

constexpr char kNeedsDefine[] = R"(
kernel void fill_x(KAD_CONTEXT, global int* out, uint n) {
  const ulong i = (ulong)kad_global_linear();
  if (kad_active() && i < (ulong)n) out[i] = X;
}
)";

constexpr char kSyntaxError[] = R"(
kernel void broken(KAD_CONTEXT, global int* out) { out[0] = ; }
)";

// A compiler must never read a host file for a client.
constexpr char kIncludesHostFile[] = R"(
#include "/etc/passwd"
kernel void sneaky(KAD_CONTEXT) {}
)";

std::vector<Program> make_programs() {
  const Entry noop{"noop", {}};
  const Entry many_args{"many_args",
                        {global(), global(true), scalar(v1::SCALAR_TYPE_I8),
                         scalar(v1::SCALAR_TYPE_U16), scalar(v1::SCALAR_TYPE_I64), local(),
                         scalar(v1::SCALAR_TYPE_F32), scalar(v1::SCALAR_TYPE_U32)}};
  const Entry fill{"fill", {global(), element_count(), scalar(v1::SCALAR_TYPE_I32)}};
  const Entry saxpy{"saxpy",
                    {global(), global(true), scalar(v1::SCALAR_TYPE_F32), element_count()}};
  std::vector<Program> p;
  p.push_back({"kernels", kKernels, {noop, many_args, fill, saxpy}});
  p.push_back({"needs_define", kNeedsDefine, {{"fill_x", {global(), element_count()}}}, true});
  p.push_back({"syntax_error", kSyntaxError, {{"broken", {global()}}}, false, true});
  p.push_back({"includes_host_file", kIncludesHostFile, {{"sneaky", {}}}, false, true});
  return p;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool run_tool(const std::vector<std::string>& argv, const std::string& log) {
  const pid_t pid = testing::spawn(argv, log);
  return pid > 0 && testing::wait_exit(pid) == 0;
}

}  // namespace

const std::vector<Program>& programs() {
  static const std::vector<Program> all = make_programs();
  return all;
}

const Program& saxpy_program() { return programs()[0]; }

std::vector<v1::ArgSpec> signature_of(const Entry& entry) {
  std::vector<v1::ArgSpec> args;
  for (const Parameter& p : entry.parameters) {
    v1::ArgSpec a;
    switch (p.space) {
      case Space::kGlobal:
      case Space::kConstant:
        a.set_kind(p.is_const ? v1::ARG_KIND_CONST_BUFFER : v1::ARG_KIND_BUFFER);
        break;
      case Space::kLocal:
        a.set_kind(v1::ARG_KIND_LOCAL);
        break;
      case Space::kPrivate:
        a.set_kind(v1::ARG_KIND_SCALAR);
        a.set_scalar(p.scalar);
        break;
    }
    args.push_back(a);
  }
  return args;
}

bool signature_matches(const Entry& entry,
                       const google::protobuf::RepeatedPtrField<v1::ArgSpec>& args) {
  if (static_cast<size_t>(args.size()) != entry.parameters.size()) return false;
  for (size_t i = 0; i < entry.parameters.size(); ++i) {
    const Parameter& p = entry.parameters[i];
    const v1::ArgSpec& a = args[static_cast<int>(i)];
    bool ok = false;
    switch (a.kind()) {
      case v1::ARG_KIND_BUFFER:
        ok = p.space == Space::kGlobal;
        break;
      case v1::ARG_KIND_CONST_BUFFER:
        ok = (p.space == Space::kGlobal || p.space == Space::kConstant) && p.is_const;
        break;
      case v1::ARG_KIND_LOCAL:
        ok = p.space == Space::kLocal;
        break;
      case v1::ARG_KIND_SCALAR:
        ok = p.space == Space::kPrivate && a.scalar() == p.scalar;
        break;
      default:
        break;
    }
    if (!ok) return false;
  }
  return true;
}

size_t scalar_size(v1::ScalarType type) {
  switch (type) {
    case v1::SCALAR_TYPE_I8:
    case v1::SCALAR_TYPE_U8:
      return 1;
    case v1::SCALAR_TYPE_I16:
    case v1::SCALAR_TYPE_U16:
    case v1::SCALAR_TYPE_F16:
      return 2;
    case v1::SCALAR_TYPE_I32:
    case v1::SCALAR_TYPE_U32:
    case v1::SCALAR_TYPE_F32:
      return 4;
    case v1::SCALAR_TYPE_I64:
    case v1::SCALAR_TYPE_U64:
    case v1::SCALAR_TYPE_F64:
      return 8;
    default:
      return 0;
  }
}

IrModules build_ir_modules(const Program& program) {
  namespace fs = std::filesystem;
  char folder[] = "/tmp/kad-api-fuzz-ir-XXXXXX";
  if (mkdtemp(folder) == nullptr) return {};
  const fs::path dir = folder;
  std::ofstream(dir / "kernel.cl", std::ios::binary) << program.source;
  const std::string bc = (dir / "kernel.bc").string(), spv = (dir / "kernel.spv").string();
  const std::string log = (dir / "tools.log").string();
  IrModules out;
  // The prelude's linked form, as its own header comment tells clients to build.
  if (run_tool({"/usr/lib/llvm-15/bin/clang", "-x", "cl", "-cl-std=CL1.2", "-target", "spir64",
                "-Xclang", "-finclude-default-header", "-Xclang", "-disable-llvm-passes",
                "-DKAD_LINKED_SPECIALIZATION", "-include", KAD_API_FUZZ_PRELUDE, "-emit-llvm", "-c",
                (dir / "kernel.cl").string(), "-o", bc},
               log)) {
    out.bitcode = read_file(bc);
    if (run_tool({"/usr/bin/llvm-spirv-15", bc, "-o", spv}, log)) out.spirv = read_file(spv);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return out;
}

}  // namespace kad::api_fuzz
