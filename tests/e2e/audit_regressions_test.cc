// Regressions for what an outside audit found (issue 10), each in the form a
// client sees it, at the wire level, on both a UNIX socket and loopback TCP,
// through a real kad on PoCL. After every test a bystander on the other
// transport runs a checked launch: one client's request never costs anyone
// else, and the daemon is still the same process.
#include <signal.h>
#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "core/toolchain.h"
#include "gmock/gmock.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/wire_session.h"
#include "tests/formats/ir_modules.h"

namespace kad {
namespace {

using ::testing::HasSubstr;
using testing::WireSession;

constexpr char kPut[] =
    "kernel void put(KAD_CONTEXT, const global float* src, global float* dst) {\n"
    "  if (kad_active()) dst[kad_global_linear()] = src[kad_global_linear()];\n}\n";

constexpr char kMixed[] =
    "kernel void mixk(KAD_CONTEXT, global long* out, ulong a, short b, uchar c, double d) {\n"
    "  if (kad_active()) out[kad_global_linear()] = (long)a + b + c + (long)d;\n}\n";

v1::ArgSpec arg(v1::ArgKind kind, v1::ScalarType scalar = v1::SCALAR_TYPE_UNSPECIFIED) {
  v1::ArgSpec a;
  a.set_kind(kind);
  a.set_scalar(scalar);
  return a;
}

v1::KernelArg buffer_arg(uint64_t handle) {
  v1::KernelArg a;
  a.set_buffer(handle);
  return a;
}

v1::KernelArg scalar_arg(v1::ScalarType type, uint64_t bits) {
  v1::KernelArg a;
  a.set_scalar_bits(bits);
  a.set_scalar(type);
  return a;
}

std::string float_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

class AuditRegressions : public testing::DaemonSuite,
                         public ::testing::WithParamInterface<std::string> {
 protected:
  std::string uri() const { return GetParam() == "tcp" ? daemon().tcp_uri() : daemon().unix_uri(); }
  std::string other_uri() const {
    return GetParam() == "tcp" ? daemon().unix_uri() : daemon().tcp_uri();
  }

  void TearDown() override {
    int status = 0;
    ASSERT_EQ(waitpid(daemon().pid(), &status, WNOHANG), 0) << "kad died:\n" << daemon().log();
    testing::expect_bystander_served(other_uri());
  }

  // The usual objects of a session, checked to exist.
  static uint64_t queue(WireSession& s) { return s.create_queue(); }
  static uint64_t buffer(WireSession& s, uint64_t bytes) { return s.allocate(bytes); }
  static grpc::Status load(WireSession& s, v1::ModuleFormat format, const std::string& code,
                           uint64_t* module) {
    v1::LoadModuleRequest request;
    request.set_format(format);
    request.set_code(code);
    v1::LoadModuleResponse r;
    grpc::Status status = s.call(&v1::Kad::Stub::LoadModule, request, &r);
    *module = r.module();
    return status;
  }
  static uint64_t module(WireSession& s, const std::string& source) {
    uint64_t m = 0;
    EXPECT_TRUE(load(s, v1::MODULE_FORMAT_OPENCL_C, source, &m).ok());
    return m;
  }
  static grpc::Status kernel(WireSession& s, uint64_t module, const std::string& entry,
                             const std::vector<v1::ArgSpec>& args, uint64_t* kernel,
                             const std::string& options = "") {
    v1::GetKernelRequest request;
    request.set_module(module);
    request.set_entry(entry);
    request.set_build_options(options);
    for (const v1::ArgSpec& a : args) *request.add_args() = a;
    v1::GetKernelResponse r;
    grpc::Status status = s.call(&v1::Kad::Stub::GetKernel, request, &r);
    *kernel = r.kernel();
    return status;
  }
  static v1::QueueCommand launch(uint64_t queue, uint64_t kernel, std::vector<int64_t> extents,
                                 std::vector<v1::KernelArg> args,
                                 std::vector<int64_t> workgroup = {}) {
    v1::QueueCommand c;
    c.set_queue(queue);
    v1::Launch* l = c.mutable_launch();
    l->set_kernel(kernel);
    for (int64_t e : extents) l->mutable_ndrange()->add_extents(e);
    if (!workgroup.empty()) {
      for (int64_t w : workgroup) l->mutable_workgroup()->add_sizes(w);
    }
    for (const v1::KernelArg& a : args) *l->add_args() = a;
    return c;
  }
  static v1::QueueCommand wait(uint64_t event) {
    v1::QueueCommand c;
    c.mutable_wait()->set_event(event);
    return c;
  }
  static v1::QueueCommand copy_in(uint64_t buffer, const std::string& data) {
    v1::QueueCommand c;
    c.mutable_copy_in()->set_buffer(buffer);
    c.mutable_copy_in()->set_data(data);
    return c;
  }
  static v1::QueueCommand copy_out(uint64_t buffer, uint64_t size) {
    v1::QueueCommand c;
    c.mutable_copy_out()->set_buffer(buffer);
    c.mutable_copy_out()->set_size(size);
    return c;
  }
  static v1::GetStatusResponse status(WireSession& s) {
    v1::GetStatusResponse r;
    EXPECT_TRUE(s.call(&v1::Kad::Stub::GetStatus, v1::GetStatusRequest(), &r).ok());
    return r;
  }
};

#define EXPECT_STATUS(status, code_, text)               \
  do {                                                   \
    const grpc::Status s_ = (status);                    \
    EXPECT_EQ(s_.error_code(), grpc::StatusCode::code_); \
    EXPECT_THAT(s_.error_message(), HasSubstr(text));    \
  } while (0)

#define EXPECT_REPLY(reply, code_, text)                                             \
  do {                                                                               \
    const v1::QueueReply r_ = (reply);                                               \
    EXPECT_EQ(r_.code(), static_cast<int>(grpc::StatusCode::code_)) << r_.message(); \
    EXPECT_THAT(r_.message(), HasSubstr(text));                                      \
  } while (0)

// Finding 1: B's shorter signature of A's compiled kernel used to launch with
// A's last arguments for the parameters B did not pass: B wrote A's buffer,
// and once A's buffers were freed, B's launch aborted kad.
TEST_P(AuditRegressions, AShorterSignatureOfACompiledKernelIsRefusedAtGetKernel) {
  WireSession a(uri(), "a"), b(uri(), "b");
  const uint64_t a_queue = queue(a), a_src = buffer(a, 64), a_dst = buffer(a, 64);
  const uint64_t a_module = module(a, kPut);
  uint64_t a_kernel = 0;
  ASSERT_TRUE(kernel(a, a_module, "put", {arg(v1::ARG_KIND_CONST_BUFFER), arg(v1::ARG_KIND_BUFFER)},
                     &a_kernel)
                  .ok());
  const std::vector<float> a_data(16, 1.5f);
  {
    WireSession::Stream stream(a);
    v1::QueueCommand write = copy_in(a_src, float_bytes(a_data));
    write.set_queue(a_queue);
    EXPECT_EQ(stream.send(write).code(), 0);
    const v1::QueueReply launched =
        stream.send(launch(a_queue, a_kernel, {16}, {buffer_arg(a_src), buffer_arg(a_dst)}));
    ASSERT_EQ(launched.code(), 0) << launched.message();
    ASSERT_EQ(stream.send(wait(launched.event())).code(), 0);
  }

  const uint64_t b_module = module(b, kPut);
  uint64_t b_kernel = 0;
  EXPECT_STATUS(kernel(b, b_module, "put", {arg(v1::ARG_KIND_CONST_BUFFER)}, &b_kernel),
                INVALID_ARGUMENT,
                "kernel `put` has 2 parameters after KAD_CONTEXT, its signature "
                "declares 1");

  // A's buffer holds what A wrote, nothing of B's.
  WireSession::Stream stream(a);
  v1::QueueCommand read = copy_out(a_dst, 64);
  read.set_queue(a_queue);
  const v1::QueueReply got = stream.send(read);
  ASSERT_EQ(got.code(), 0) << got.message();
  EXPECT_EQ(got.data(), float_bytes(a_data));
}

TEST_P(AuditRegressions, ASignatureWithOtherKindsOfACompiledKernelIsRefusedAtGetKernel) {
  WireSession s(uri(), "kinds");
  const uint64_t q = queue(s), out = buffer(s, 64);
  const uint64_t m = module(s, kMixed);
  uint64_t good = 0;
  ASSERT_TRUE(kernel(s, m, "mixk",
                     {arg(v1::ARG_KIND_BUFFER), arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_U64),
                      arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_I16),
                      arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_U8),
                      arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_F64)},
                     &good)
                  .ok());
  double d = 4.0;
  uint64_t d_bits;
  std::memcpy(&d_bits, &d, sizeof(d));
  {
    WireSession::Stream stream(s);
    const v1::QueueReply r = stream.send(launch(
        q, good, {8},
        {buffer_arg(out), scalar_arg(v1::SCALAR_TYPE_U64, 1), scalar_arg(v1::SCALAR_TYPE_I16, 2),
         scalar_arg(v1::SCALAR_TYPE_U8, 3), scalar_arg(v1::SCALAR_TYPE_F64, d_bits)}));
    ASSERT_EQ(r.code(), 0) << r.message();
    ASSERT_EQ(stream.send(wait(r.event())).code(), 0);
  }
  // A buffer where the kernel takes a ulong used to reach PoCL's enqueue.
  uint64_t bad = 0;
  EXPECT_STATUS(kernel(s, m, "mixk",
                       {arg(v1::ARG_KIND_BUFFER), arg(v1::ARG_KIND_BUFFER),
                        arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_I16),
                        arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_U8),
                        arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_I64)},
                       &bad),
                INVALID_ARGUMENT,
                "kernel `mixk`: argument 1 is declared a buffer but the kernel's parameter `a` "
                "has type `ulong`");
}

// A module's macros may change its kernels' parameters: what one session's
// compile learnt of them with its build options says nothing of another's
// signature with other options (a review found GetKernel refusing it).
TEST_P(AuditRegressions, ParametersKnownForOneSetOfBuildOptionsDoNotJudgeAnother) {
  const std::string source = absl::StrCat(
      "kernel void scaled(KAD_CONTEXT, global int* out\n"
      "#ifdef WITH_SCALE\n"
      "  , int scale\n"
      "#endif\n"
      ") {\n"
      "#ifndef WITH_SCALE\n"
      "  const int scale = 1;\n"
      "#endif\n"
      "  if (kad_active()) out[kad_global_linear()] = 3 * scale;\n}\n// ",
      GetParam(), "\n");
  WireSession a(uri(), "a"), b(uri(), "b");
  const uint64_t a_queue = queue(a), a_out = buffer(a, 64);
  uint64_t a_kernel = 0;
  ASSERT_TRUE(kernel(a, module(a, source), "scaled", {arg(v1::ARG_KIND_BUFFER)}, &a_kernel).ok());
  {
    WireSession::Stream stream(a);
    const v1::QueueReply r = stream.send(launch(a_queue, a_kernel, {16}, {buffer_arg(a_out)}));
    ASSERT_EQ(r.code(), 0) << r.message();
    ASSERT_EQ(stream.send(wait(r.event())).code(), 0);
  }
  // Known now: one parameter, with no options. With -DWITH_SCALE, two.
  const uint64_t b_queue = queue(b), b_out = buffer(b, 64);
  uint64_t b_kernel = 0;
  const grpc::Status got =
      kernel(b, module(b, source), "scaled",
             {arg(v1::ARG_KIND_BUFFER), arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_I32)}, &b_kernel,
             "-DWITH_SCALE");
  ASSERT_TRUE(got.ok()) << got.error_message();
  WireSession::Stream stream(b);
  const v1::QueueReply r = stream.send(
      launch(b_queue, b_kernel, {16}, {buffer_arg(b_out), scalar_arg(v1::SCALAR_TYPE_I32, 5)}));
  ASSERT_EQ(r.code(), 0) << r.message();
  ASSERT_EQ(stream.send(wait(r.event())).code(), 0);
  v1::QueueCommand read = copy_out(b_out, 64);
  read.set_queue(b_queue);
  const v1::QueueReply data = stream.send(read);
  ASSERT_EQ(data.code(), 0) << data.message();
  std::vector<int32_t> values(16);
  ASSERT_EQ(data.data().size(), 64u);
  std::memcpy(values.data(), data.data().data(), 64);
  EXPECT_EQ(values, std::vector<int32_t>(16, 15));
  // The same options as A's are still judged by what A's compile learnt.
  EXPECT_STATUS(
      kernel(b, module(b, source), "scaled",
             {arg(v1::ARG_KIND_BUFFER), arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_I32)}, &b_kernel),
      INVALID_ARGUMENT,
      "kernel `scaled` has 1 parameters after KAD_CONTEXT, its signature declares 2");
}

TEST_P(AuditRegressions, AWrongSignatureIsRefusedAtTheFirstLaunchWhenNothingCompiledItYet) {
  WireSession s(uri(), "first");
  const uint64_t q = queue(s), src = buffer(s, 64);
  // Its own module text: no session has compiled it, so GetKernel cannot know.
  const uint64_t m = module(s, std::string(kPut) + "// " + GetParam() + " first launch\n");
  uint64_t k = 0;
  ASSERT_TRUE(kernel(s, m, "put", {arg(v1::ARG_KIND_CONST_BUFFER)}, &k).ok());
  WireSession::Stream stream(s);
  for (int i = 0; i < 2; ++i) {  // refused every time, and compiled once
    EXPECT_REPLY(stream.send(launch(q, k, {16}, {buffer_arg(src)})), INVALID_ARGUMENT,
                 "kernel `put` has 2 parameters after KAD_CONTEXT, its signature declares 1");
  }
}

// Finding 2: PoCL counts a launch's groups in 32 bits and aborted on this.
TEST_P(AuditRegressions, ALaunchBeyondTheDevicesGroupsInOneLaunchIsRefusedNamingTheLimit) {
  WireSession s(uri(), "groups");
  const uint64_t q = queue(s), out = buffer(s, 64);
  const uint64_t m = module(s, testing::kFillSource);
  uint64_t k = 0;
  ASSERT_TRUE(kernel(s, m, "fill",
                     {arg(v1::ARG_KIND_BUFFER), arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_I32)}, &k)
                  .ok());
  WireSession::Stream stream(s);
  const int64_t big = int64_t{1} << 31;
  EXPECT_REPLY(
      stream.send(launch(q, k, {big, big}, {buffer_arg(out), scalar_arg(v1::SCALAR_TYPE_I32, 1)})),
      INVALID_ARGUMENT, "exceed the device's maximum of 4294967295 groups in one launch");
  EXPECT_REPLY(stream.send(launch(q, k, {big, big},
                                  {buffer_arg(out), scalar_arg(v1::SCALAR_TYPE_I32, 1)}, {1, 1})),
               INVALID_ARGUMENT, "groups exceed the device's maximum of 4294967295");
}

// Finding 3: `-D` alone crashed PoCL's build; nothing outside the allow-list
// may reach a compiler.
TEST_P(AuditRegressions, MalformedOrForbiddenBuildOptionsAreRefusedAtGetKernel) {
  WireSession s(uri(), "options");
  const uint64_t m = module(s, testing::kFillSource);
  const std::vector<v1::ArgSpec> args = {arg(v1::ARG_KIND_BUFFER),
                                         arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_I32)};
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"-D", "build option `-D` has no macro name after it"},
      {"-cl-mad-enable -U FOO", "build option `-U` is not allowed"},
      {"-D=1", "build option `-D=1` does not name a macro"},
      {"-I/etc", "build option `-I/etc` is not allowed"},
      {"-include /etc/passwd", "build option `-include` is not allowed"},
      {"@/etc/passwd", "build option `@/etc/passwd` is not allowed"},
      {"-Xclang -load -Xclang /tmp/x.so", "build option `-Xclang` is not allowed"},
      {"-DKAD_RANK=3", "names macro `KAD_RANK`, which is reserved"},
      {"-DX=\"/etc/passwd\"", "the value `\"/etc/passwd\"` may hold only"},
      {"-cl-std=CL2.0", "build option `-cl-std=CL2.0` is not allowed"},
  };
  for (const auto& [options, text] : cases) {
    uint64_t k = 0;
    SCOPED_TRACE(options);
    EXPECT_STATUS(kernel(s, m, "fill", args, &k, options), INVALID_ARGUMENT, text);
  }
  // Everything allowed compiles and runs on the device.
  uint64_t k = 0;
  ASSERT_TRUE(kernel(s, m, "fill", args, &k,
                     "-D N=3 -DM -DV=1.5e+3 -w -Werror -cl-opt-disable -cl-mad-enable "
                     "-cl-no-signed-zeros -cl-unsafe-math-optimizations -cl-finite-math-only "
                     "-cl-fast-relaxed-math -cl-denorms-are-zero -cl-single-precision-constant "
                     "-cl-fp32-correctly-rounded-divide-sqrt")
                  .ok());
  const uint64_t q = queue(s), out = buffer(s, 64);
  WireSession::Stream stream(s);
  const v1::QueueReply r =
      stream.send(launch(q, k, {16}, {buffer_arg(out), scalar_arg(v1::SCALAR_TYPE_I32, 9)}));
  ASSERT_EQ(r.code(), 0) << r.message();
  EXPECT_EQ(stream.send(wait(r.event())).code(), 0);
}

// Finding 3, IR: PoCL's LLVM asserts on kernel metadata it cannot read. kad
// verifies IR in a child process first.
class IrMutation {
 public:
  IrMutation() {
    char tmpl[] = "/tmp/kad-ir-mutation-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~IrMutation() { std::filesystem::remove_all(dir_); }
  // `bitcode` disassembled, edited as text by `edit`, assembled again.
  std::string edit(const std::string& bitcode,
                   const std::function<std::string(std::string)>& edit) {
    const std::string bc = dir_ + "/in.bc", ll = dir_ + "/in.ll", out = dir_ + "/out.bc";
    std::ofstream(bc, std::ios::binary) << bitcode;
    EXPECT_TRUE(ran({testing::llvm_tool("llvm-dis"), bc, "-o", ll}));
    std::stringstream text;
    text << std::ifstream(ll).rdbuf();
    std::ofstream(ll, std::ios::binary) << edit(text.str());
    EXPECT_TRUE(ran({testing::llvm_tool("llvm-as"), ll, "-o", out}));
    std::stringstream result;
    result << std::ifstream(out, std::ios::binary).rdbuf();
    return result.str();
  }

 private:
  static bool ran(const std::vector<std::string>& argv) {
    absl::StatusOr<ToolRun> run = run_limited(argv, {});
    return run.ok() && run->exit_code == 0 && run->signal == 0;
  }
  std::string dir_;
};

TEST_P(AuditRegressions, IrModulesWithKernelMetadataDriversCannotReadAreRefusedAtLoadModule) {
  absl::StatusOr<std::string> bitcode =
      testing::build_linked_ir(testing::kFillSource, ModuleFormat::kLlvmBitcodeSpir64);
  ASSERT_TRUE(bitcode.ok()) << bitcode.status();
  WireSession s(uri(), "ir");
  IrMutation mutation;
  const std::vector<std::tuple<std::string, std::function<std::string(std::string)>, std::string>>
      cases = {
          // A flipped bit in a metadata kind's name: the kernel loses it.
          {"renamed kind",
           [](std::string ir) {
             return absl::StrReplaceAll(ir,
                                        {{"!kernel_arg_addr_space ", "!kernel_arg_adds_space "}});
           },
           "kernel `fill` has no !kernel_arg_addr_space metadata"},
          // One entry fewer than the kernel has parameters.
          {"short list",
           [](std::string ir) {
             return absl::StrReplaceAll(ir, {{"!{i32 0, i32 1, i32 0}", "!{i32 0, i32 1}"}});
           },
           "kernel `fill` has 3 parameters but its !kernel_arg_addr_space metadata has 2 entries"},
          {"not a number",
           [](std::string ir) {
             return absl::StrReplaceAll(ir,
                                        {{"!{i32 0, i32 1, i32 0}", "!{i32 0, !\"x\", i32 0}"}});
           },
           "entry 1 of its !kernel_arg_addr_space metadata is `!\"x\"`"},
      };
  for (const auto& [what, edit, text] : cases) {
    SCOPED_TRACE(what);
    const std::string mutated = mutation.edit(*bitcode, edit);
    ASSERT_NE(mutated, *bitcode) << what << ": the edit changed nothing";
    uint64_t m = 0;
    EXPECT_STATUS(load(s, v1::MODULE_FORMAT_LLVM_BC_SPIR64, mutated, &m), INVALID_ARGUMENT, text);
  }
  // Bitcode that LLVM's verifier refuses never reaches PoCL either.
  uint64_t m = 0;
  std::string truncated = bitcode->substr(0, bitcode->size() / 8 * 4);  // whole words
  EXPECT_STATUS(load(s, v1::MODULE_FORMAT_LLVM_BC_SPIR64, truncated, &m), INVALID_ARGUMENT,
                "opt failed verifying a LLVM bitcode (spir64) module");
}

TEST_P(AuditRegressions, IrModulesWithFlippedBitsNeverTakeTheDaemonDown) {
  absl::StatusOr<std::string> bitcode =
      testing::build_linked_ir(testing::kFillSource, ModuleFormat::kLlvmBitcodeSpir64);
  ASSERT_TRUE(bitcode.ok()) << bitcode.status();
  WireSession s(uri(), "flips");
  const uint64_t q = queue(s), out = buffer(s, 64);
  std::mt19937 random(GetParam() == "tcp" ? 7 : 11);
  WireSession::Stream stream(s);
  for (int i = 0; i < 12; ++i) {
    std::string flipped = *bitcode;
    const size_t bit = random() % (flipped.size() * 8);
    flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
    uint64_t m = 0;
    const grpc::Status loaded = load(s, v1::MODULE_FORMAT_LLVM_BC_SPIR64, flipped, &m);
    if (!loaded.ok()) {
      EXPECT_EQ(loaded.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << loaded.error_message();
      continue;
    }
    uint64_t k = 0;
    if (!kernel(s, m, "fill",
                {arg(v1::ARG_KIND_BUFFER), arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_I32)}, &k)
             .ok()) {
      continue;
    }
    const v1::QueueReply r =
        stream.send(launch(q, k, {16}, {buffer_arg(out), scalar_arg(v1::SCALAR_TYPE_I32, 1)}));
    if (r.code() == 0) stream.send(wait(r.event()));
  }
  int status = 0;
  EXPECT_EQ(waitpid(daemon().pid(), &status, WNOHANG), 0) << "kad died on bit " << daemon().log();
}

// Found by the API fuzzer: PoCL hid an IR module's argument info (SPIR built
// without -cl-kernel-arg-info), so only the count was checked, and a scalar
// passed for a pointer made PoCL dereference the client's bits.
TEST_P(AuditRegressions, AnIrKernelsSignatureIsCheckedAgainstItsParameterKinds) {
  absl::StatusOr<std::string> bitcode = testing::build_linked_ir(
      std::string(testing::kFillSource) + "// " + GetParam() + " IR kinds\n",
      ModuleFormat::kLlvmBitcodeSpir64);
  ASSERT_TRUE(bitcode.ok()) << bitcode.status();
  WireSession s(uri(), "ir-kinds");
  const uint64_t q = queue(s), out = buffer(s, 64);
  uint64_t m = 0, lying = 0, right = 0;
  ASSERT_TRUE(load(s, v1::MODULE_FORMAT_LLVM_BC_SPIR64, *bitcode, &m).ok());
  ASSERT_TRUE(kernel(s, m, "fill",
                     {arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_U64),
                      arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_I32)},
                     &lying)
                  .ok());  // nothing compiled the entry yet: checked at the launch
  WireSession::Stream stream(s);
  EXPECT_REPLY(stream.send(launch(
                   q, lying, {16},
                   {scalar_arg(v1::SCALAR_TYPE_U64, 0x1000), scalar_arg(v1::SCALAR_TYPE_I32, 7)})),
               INVALID_ARGUMENT,
               "kernel `fill`: argument 0 is declared a ulong but the kernel's parameter has type "
               "`int*`");
  ASSERT_TRUE(kernel(s, m, "fill",
                     {arg(v1::ARG_KIND_BUFFER), arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_I32)},
                     &right)
                  .ok());
  const v1::QueueReply ran =
      stream.send(launch(q, right, {16}, {buffer_arg(out), scalar_arg(v1::SCALAR_TYPE_I32, 7)}));
  ASSERT_EQ(ran.code(), 0) << ran.message();
  ASSERT_EQ(stream.send(wait(ran.event())).code(), 0);
  // Compiled once: now GetKernel itself refuses the lie.
  EXPECT_STATUS(kernel(s, m, "fill",
                       {arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_U64),
                        arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_I32)},
                       &lying),
                INVALID_ARGUMENT, "argument 0 is declared a ulong but the kernel's parameter has");
}

// Finding 4.
TEST_P(AuditRegressions, WaitingForAnEventNeverIssuedIsNotFound) {
  WireSession s(uri(), "wait");
  const uint64_t q = queue(s);
  WireSession::Stream stream(s);
  v1::QueueCommand w = wait(424242);
  w.set_queue(q);
  EXPECT_REPLY(stream.send(w), NOT_FOUND, "event 424242 was never issued");
}

// Finding 5: the size used to be reported after padding, as (8192, 1, 1).
TEST_P(AuditRegressions, AWorkgroupOverTheMaximumIsReportedAsTheClientGaveIt) {
  WireSession s(uri(), "workgroup");
  const uint64_t q = queue(s), out = buffer(s, 64);
  uint64_t k = 0;
  ASSERT_TRUE(kernel(s, module(s, testing::kFillSource), "fill",
                     {arg(v1::ARG_KIND_BUFFER), arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_I32)}, &k)
                  .ok());
  WireSession::Stream stream(s);
  EXPECT_REPLY(
      stream.send(launch(q, k, {64, 64, 2}, {buffer_arg(out), scalar_arg(v1::SCALAR_TYPE_I32, 1)},
                         {64, 64, 2})),
      INVALID_ARGUMENT, "workgroup size (64, 64, 2) has 8192 work-items, more than");
}

// Finding 6, one contract gap each.
TEST_P(AuditRegressions, ASubmitStreamEndsWhenItsSessionCloses) {
  WireSession s(uri(), "closing");
  EXPECT_FALSE(testing::close_session_under_a_stream(s, queue(s)).ok());
}

TEST_P(AuditRegressions, ASpirvModuleThatCrashesItsTranslatorIsTheClientsError) {
  absl::StatusOr<std::string> spirv =
      testing::build_linked_ir(testing::kFillSource, ModuleFormat::kSpirv);
  ASSERT_TRUE(spirv.ok()) << spirv.status();
  // The first instruction (an OpCapability) gets an opcode llvm-spirv 15 does
  // not implement: it asserts, and dies on SIGABRT — or, confined to its
  // sandbox, LLVM's crash handler fails to write its report and exits 1.
  std::string crashing = *spirv;
  crashing[20] = static_cast<char>(0xff);
  crashing[21] = static_cast<char>(0x7f);
  WireSession s(uri(), "spirv");
  uint64_t m = 0;
  const grpc::Status loaded = load(s, v1::MODULE_FORMAT_SPIRV, crashing, &m);
  EXPECT_EQ(loaded.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << loaded.error_message();
  EXPECT_THAT(loaded.error_message(), ::testing::StartsWith("llvm-spirv"));
  EXPECT_THAT(loaded.error_message(), HasSubstr("verifying a SPIR-V module"));
  EXPECT_THAT(loaded.error_message(), HasSubstr("Assertion `0 && \"Not implemented\"' failed"));
}

TEST_P(AuditRegressions, AnEmptyNdrangeIsCheckedLikeAnyLaunchThenCompletesAtOnce) {
  WireSession s(uri(), "empty");
  const uint64_t q = queue(s), out = buffer(s, 64);
  uint64_t k = 0;
  ASSERT_TRUE(kernel(s, module(s, testing::kFillSource), "fill",
                     {arg(v1::ARG_KIND_BUFFER), arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_I32)}, &k)
                  .ok());
  const std::vector<v1::KernelArg> args = {buffer_arg(out), scalar_arg(v1::SCALAR_TYPE_I32, 1)};
  WireSession::Stream stream(s);
  EXPECT_REPLY(stream.send(launch(q, 9999, {0}, args)), NOT_FOUND, "no kernel 9999");
  EXPECT_REPLY(stream.send(launch(q, k, {0}, {buffer_arg(out)})), INVALID_ARGUMENT,
               "kernel `fill` takes 2 arguments, the launch gave 1");
  EXPECT_REPLY(stream.send(launch(q, k, {0}, {buffer_arg(out), buffer_arg(out)})), INVALID_ARGUMENT,
               "argument 1 must be a int");
  EXPECT_REPLY(stream.send(launch(q, k, {5, 0}, args, {1 << 20})), INVALID_ARGUMENT,
               "workgroup size (1048576, 1) has 1048576 work-items, more than");
  const v1::QueueReply ok = stream.send(launch(q, k, {2, 0, 2, 2}, args));
  EXPECT_EQ(ok.code(), 0) << ok.message();
  EXPECT_EQ(ok.event(), 0u);
}

TEST_P(AuditRegressions, AScalarTypeOnAnArgumentThatIsNoScalarIsRefused) {
  WireSession s(uri(), "arg-kinds");
  const uint64_t m = module(s, testing::kFillSource);
  uint64_t k = 0;
  EXPECT_STATUS(
      kernel(s, m, "fill", {arg(v1::ARG_KIND_LOCAL, static_cast<v1::ScalarType>(99))}, &k),
      INVALID_ARGUMENT, "argument 0 is not a scalar (kind 4) but names scalar type 99");
  EXPECT_STATUS(kernel(s, m, "fill",
                       {arg(v1::ARG_KIND_BUFFER, v1::SCALAR_TYPE_F32),
                        arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_I32)},
                       &k),
                INVALID_ARGUMENT, "argument 0 is not a scalar (kind 1) but names scalar type 10");
}

TEST_P(AuditRegressions, AReadOfZeroBytesNamingAnUnknownQueueIsNotFound) {
  WireSession s(uri(), "zero-read");
  const uint64_t b = buffer(s, 64);
  v1::ReadBufferRequest request;
  request.set_queue(31337);
  request.set_buffer(b);
  request.set_size(0);
  grpc::ClientContext context;
  s.prepare(context);
  auto reader = s.stub().ReadBuffer(&context, request);
  v1::BufferChunk chunk;
  while (reader->Read(&chunk)) {
  }
  EXPECT_STATUS(reader->Finish(), NOT_FOUND, "session has no queue 31337");
}

TEST_P(AuditRegressions, AModuleThatFailsToLowerIsNotLoweredAgainOnEveryLaunch) {
  // SPIR-V that is well formed but not built against kad's linked prelude:
  // lowering it for PoCL fails, the same way every time.
  absl::StatusOr<std::string> plain = testing::build_plain_ir(
      absl::StrFormat("kernel void fill(global int* out, int v) { out[%d] = v; }",
                      GetParam() == "tcp" ? 1 : 0),
      ModuleFormat::kSpirv);
  ASSERT_TRUE(plain.ok()) << plain.status();
  WireSession s(uri(), "lowering");
  const uint64_t q = queue(s), out = buffer(s, 64);
  uint64_t m = 0, k = 0;
  ASSERT_TRUE(load(s, v1::MODULE_FORMAT_SPIRV, *plain, &m).ok());
  ASSERT_TRUE(kernel(s, m, "fill",
                     {arg(v1::ARG_KIND_BUFFER), arg(v1::ARG_KIND_SCALAR, v1::SCALAR_TYPE_I32)}, &k)
                  .ok());
  const v1::GetStatusResponse before = status(s);
  WireSession::Stream stream(s);
  for (int i = 0; i < 5; ++i) {
    EXPECT_REPLY(
        stream.send(launch(q, k, {16}, {buffer_arg(out), scalar_arg(v1::SCALAR_TYPE_I32, 1)})),
        INVALID_ARGUMENT, "was not built against kad's linked prelude");
  }
  const v1::GetStatusResponse after = status(s);
  EXPECT_EQ(after.cache_failures() - before.cache_failures(), 1u);
  EXPECT_EQ(after.cache_remembered_failures() - before.cache_remembered_failures(), 4u);
}

INSTANTIATE_TEST_SUITE_P(Transports, AuditRegressions, ::testing::Values("unix", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kad
