// What an AMDGCN code object says about its kernels: the NT_AMDGPU_METADATA
// note (msgpack, "amdhsa.kernels") of the ELF that ld.lld links. The HSA
// runtime loads the code but does not tell a loader where each argument
// goes or how large a workgroup the compiler allowed (OpenCL kernels default
// to 256 work-items on amdgcn): kad reads both from here.
//
// Code objects may come from clients (ModuleFormat::kAmdgcnCodeObject), so
// the reader trusts nothing: every offset is checked against the bytes, and
// every argument against the kernarg segment it claims to lie in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kad::hsa {

// The argument kinds kad fills in (`.value_kind`); every other hidden
// argument is kHiddenOther (zeroed), every other explicit one kOther
// (images, samplers, pipes, queues: rejected when the kernel is loaded).
enum class ArgValueKind : uint8_t {
  kByValue,
  kGlobalBuffer,
  kDynamicSharedPointer,  // an OpenCL `local` pointer: an offset into the group segment
  kHiddenGlobalOffsetX,
  kHiddenGlobalOffsetY,
  kHiddenGlobalOffsetZ,
  kHiddenBlockCountX,  // code object v5: workgroups per dimension
  kHiddenBlockCountY,
  kHiddenBlockCountZ,
  kHiddenGroupSizeX,  // code object v5: work-items per workgroup
  kHiddenGroupSizeY,
  kHiddenGroupSizeZ,
  kHiddenRemainderX,  // code object v5: items of the last, partial group
  kHiddenRemainderY,
  kHiddenRemainderZ,
  kHiddenGridDims,
  kHiddenDynamicLdsSize,
  kHiddenPrintfBuffer,  // printf needs a buffer kad does not provide
  kHiddenOther,         // hidden_none, queue pointers, heaps, ...: zero
  kOther,
};

ArgValueKind arg_value_kind(absl::string_view value_kind);
bool is_hidden(ArgValueKind kind);

struct ArgMetadata {
  std::string value_kind;  // as the metadata spells it, for messages
  ArgValueKind kind = ArgValueKind::kOther;
  uint32_t offset = 0;  // in the kernarg segment
  uint32_t size = 0;
  uint32_t pointee_align = 0;  // dynamic_shared_pointer only; 0 when absent
  std::string type_name;       // "float*", "ulong"; may be empty
  std::string address_space;   // "global", "constant", "local"; may be empty
  bool is_const = false;
};

struct KernelMetadata {
  std::string name;    // the kernel function
  std::string symbol;  // its kernel descriptor, "<name>.kd"
  uint32_t kernarg_segment_size = 0;
  uint32_t kernarg_segment_align = 0;
  uint32_t group_segment_fixed_size = 0;
  uint32_t private_segment_fixed_size = 0;
  uint32_t max_flat_workgroup_size = 0;
  uint32_t wavefront_size = 0;
  bool uses_dynamic_stack = false;
  std::vector<ArgMetadata> args;  // explicit, then hidden, as the compiler lists them
};

struct CodeObjectMetadata {
  std::string target;          // "amdgcn-amd-amdhsa--gfx90a[:xnack-...]"
  uint32_t version_major = 0;  // amdhsa.version: 1.1 is code object v4, 1.2 v5
  uint32_t version_minor = 0;
  std::vector<KernelMetadata> kernels;

  // The kernel named `name`, or null.
  const KernelMetadata* find_kernel(absl::string_view name) const;
};

// Reads the metadata note of an AMDGPU ELF. INVALID_ARGUMENT, naming what is
// wrong, for anything that is not a well-formed code object.
absl::StatusOr<CodeObjectMetadata> read_code_object_metadata(absl::string_view code_object);

// The processor of a target or ISA name, without the target features:
// "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-" -> "gfx90a". Empty when the name
// has no processor.
absl::string_view target_processor(absl::string_view target);

}  // namespace kad::hsa
