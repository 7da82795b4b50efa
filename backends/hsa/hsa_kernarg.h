// A kernel's kernarg segment: where each value of a launch goes, worked out
// once from the code object's metadata when the kernel is loaded, and filled
// per launch without allocating (DESIGN §7).
//
// Explicit parameter 0 is the kernel's `kad_context` (kad::LaunchContext, 256
// bytes, by value); then the user's arguments: a buffer is its 8-byte device
// address, a scalar its value, a `local` pointer the offset of its memory in
// the group segment (the dispatch's group segment grows by it). Everything
// else is zero, notably hidden_global_offset_{x,y,z}: kad's offsets travel in
// the context. Code object v5's hidden geometry (block count, group size,
// remainder, grid dimensions, dynamic LDS size) is filled in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/hsa/hsa_code_object.h"
#include "core/backend.h"

namespace kad::hsa {

// Dynamic group memory of `local` arguments starts at this alignment at
// least (more when the metadata's pointee alignment asks for it).
inline constexpr uint32_t kLocalAlignment = 16;

struct KernargSlot {
  uint32_t offset = 0;
  uint32_t size = 0;
  uint32_t align = 1;  // local arguments: alignment of their group memory
  ArgKind kind = ArgKind::kScalar;
};

struct HiddenSlot {
  uint32_t offset = 0;
  uint32_t size = 0;
  ArgValueKind kind = ArgValueKind::kHiddenOther;
};

struct KernargLayout {
  std::string kernel;                // for messages
  uint32_t size = 0;                 // bytes of the segment
  uint32_t context_offset = 0;       // kad_context, sizeof(LaunchContext) bytes
  uint32_t group_segment_fixed = 0;  // static group memory; local arguments follow it
  std::vector<KernargSlot> args;     // the user's arguments, in order
  std::vector<HiddenSlot> hidden;    // hidden arguments kad fills with a value other than 0
};

// Checks the kernel's parameters against its declared signature (names the
// first that differs) and returns where each goes.
absl::StatusOr<KernargLayout> make_kernarg_layout(const KernelMetadata& kernel,
                                                  const KernelSignature& signature);

// The device address of a buffer argument (the packer never dereferences
// the pointer itself).
using BufferAddress = uint64_t (*)(const Buffer* buffer);

// Writes the kernarg segment of one launch into `out` (at least layout.size
// bytes) and returns the dispatch's group segment size: the static part plus
// every `local` argument's memory. `args` were validated by core/ against the
// signature the layout was made from. Allocates nothing.
absl::StatusOr<uint32_t> pack_kernargs(const KernargLayout& layout, const LaunchContext& context,
                                       std::span<const KernelArg> args,
                                       const LaunchGeometry& geometry, BufferAddress address_of,
                                       std::span<std::byte> out);

}  // namespace kad::hsa
