// The kernels the API fuzzer loads: a small fixed set of OpenCL C programs
// whose parameters it knows, so that it can tell a signature that matches a
// kernel from one that does not, and keep every launch it expects kad to
// accept cheap and inside its buffers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kad/v1/kad.grpc.pb.h"

namespace kad::api_fuzz {

// One kernel parameter after KAD_CONTEXT, as the OpenCL compiler reports it.
struct Parameter {
  enum class Space { kGlobal, kConstant, kLocal, kPrivate };
  Space space;
  bool is_const = false;
  v1::ScalarType scalar = v1::SCALAR_TYPE_UNSPECIFIED;  // for kPrivate
  // A scalar the kernel bounds its buffer accesses with: the launch passes at
  // most the element count (4-byte elements) of every buffer parameter.
  bool is_element_count = false;
};

struct Entry {
  std::string name;
  std::vector<Parameter> parameters;
};

struct Program {
  std::string name;  // for the journal
  std::string source;
  std::vector<Entry> entries;
  // Compiles only with -DX=<value> among the build options.
  bool needs_define_x = false;
  // Never compiles, whatever the options.
  bool broken = false;
};

// The programs: kernels that do nothing or stay inside their buffers, one that
// needs a define, one with a syntax error, one that tries to read a host file.
const std::vector<Program>& programs();
// The program whose `saxpy` the liveness check runs.
const Program& saxpy_program();

// The signature that matches `entry` exactly.
std::vector<v1::ArgSpec> signature_of(const Entry& entry);
// Whether kad must accept `args` as the signature of `entry` (the rules of
// core/kernel_signature.cc: a buffer is a global pointer, a const buffer a
// const global or constant pointer, a local a local pointer, a scalar a value
// of exactly that type).
bool signature_matches(const Entry& entry,
                       const google::protobuf::RepeatedPtrField<v1::ArgSpec>& args);

// Size in bytes of a valid scalar type; 0 for anything else.
size_t scalar_size(v1::ScalarType type);

// `program` compiled by clang-15 for spir64 against the prelude's linked form,
// as a client builds IR modules: LLVM bitcode, and SPIR-V through
// llvm-spirv-15. nullopt where the tools are missing or fail.
struct IrModules {
  std::optional<std::string> bitcode;
  std::optional<std::string> spirv;
};
IrModules build_ir_modules(const Program& program);

}  // namespace kad::api_fuzz
