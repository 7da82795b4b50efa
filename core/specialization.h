// Stage 3 of the launch pipeline (DESIGN §3.3, §5): what is baked into a
// compiled kernel, and the key that names it in the cache.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "core/dims.h"
#include "core/kernel_signature.h"
#include "core/partition.h"
#include "core/select_launch.h"

namespace kad {

// Everything about a launch that the compiled code depends on. Dynamic sizes
// and a tuned workgroup size are not here: they travel in the LaunchContext.
struct Specialization {
  LaunchChoice choice;
  std::optional<NdRange> static_ndrange;
  std::optional<Dims> static_workgroup;
  std::optional<Dims> static_blocks;  // only when ndrange and workgroup are both static
  bool check_bounds = true;           // false only when static sizes divide evenly
  bool operator==(const Specialization&) const = default;
};

Specialization specialize(const KernelSignature& kernel, const Partition& partition,
                          const LaunchChoice& choice);

// The hardware workgroup a static workgroup size launches as: padded to three
// dimensions (N-d), or (product, 1, 1) for a linear launch. None when the
// workgroup size is dynamic. Backends use it as the kernel's fixed block size.
std::optional<std::array<uint64_t, 3>> static_hardware_workgroup(const Specialization& spec);

// The `#define` block that the prelude reads (KAD_RANK, KAD_LINEAR, ...).
std::string specialization_defines(const Specialization& spec);

// The complete program for an OpenCL C module: defines, prelude, then the
// user's source with its own line numbers.
std::string specialised_source(const Specialization& spec, absl::string_view user_source);

// The prelude shipped with kad (prelude/kad_prelude.cl).
absl::string_view prelude_source();

// Names one compiled kernel (DESIGN §5): every input that changes the output,
// and nothing else.
struct SpecializationKey {
  std::string module_digest;
  std::string entry;
  std::string signature;  // signature_text(): its argument kinds
  std::string device_id;
  Specialization spec;
  std::string compiler_options;   // the kernel's and the backend's
  std::string toolchain_version;  // compiler and driver versions
  // The kernel's own build options (in compiler_options too; not in
  // canonical()): macros may change its parameters (KernelCache::parameters).
  std::string build_options;

  // A stable text form, one field per line, ending with the SHA-256 of the
  // prelude (compiled into every kernel): the cache's map key, and hashed
  // (SHA-256) to name entries on disk.
  std::string canonical() const;
};

}  // namespace kad
