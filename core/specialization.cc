#include "core/specialization.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/module.h"

namespace kad {

extern const char kPreludeSource[];  // generated from prelude/kad_prelude.cl

namespace {

// All kMaxRank entries, padded with `fill`, comma-separated for an array initialiser.
std::string padded_list(const Dims& dims, int64_t fill) {
  std::string out;
  for (int d = 0; d < kMaxRank; ++d)
    absl::StrAppend(&out, d ? ", " : "", d < dims.rank ? dims[d] : fill, "L");
  return out;
}

// Names the prelude in every key: the prelude is compiled into every kernel
// (and into the specialisation module of every IR module), so code built
// against another version of it must not be found.
const std::string& prelude_digest() {
  static const std::string* digest = new std::string(sha256_hex(kPreludeSource));
  return *digest;
}

}  // namespace

absl::string_view prelude_source() { return kPreludeSource; }

Specialization specialize(const KernelSignature& kernel, const Partition& partition,
                          const LaunchChoice& choice) {
  Specialization spec;
  spec.choice = choice;
  spec.static_ndrange = kernel.static_ndrange;
  if (kernel.static_workgroup) spec.static_workgroup = partition.workgroup;  // padded, 0 -> 1
  if (partition.static_blocks) {
    spec.static_blocks = partition.blocks;
    spec.check_bounds = partition.dynamic_check;
  }
  return spec;
}

std::optional<std::array<uint64_t, 3>> static_hardware_workgroup(const Specialization& spec) {
  if (!spec.static_workgroup) return std::nullopt;
  std::array<uint64_t, 3> block{1, 1, 1};
  const Dims& w = *spec.static_workgroup;
  if (spec.choice.linear) {
    for (int d = 0; d < w.rank; ++d) block[0] *= static_cast<uint64_t>(w[d]);
  } else {
    for (int d = 0; d < w.rank && d < 3; ++d) block[d] = static_cast<uint64_t>(w[d]);
  }
  return block;
}

std::string specialization_defines(const Specialization& s) {
  std::string out =
      absl::StrFormat("#define KAD_RANK %d\n#define KAD_LINEAR %d\n#define KAD_INDEX_BITS %d\n",
                      s.choice.rank, s.choice.linear ? 1 : 0, s.choice.index_bits);
  absl::StrAppend(&out, "#define KAD_STATIC_NDRANGE ", s.static_ndrange ? 1 : 0, "\n");
  if (s.static_ndrange) {
    absl::StrAppend(&out, "#define KAD_STATIC_EXTENTS ", padded_list(s.static_ndrange->extents, 1),
                    "\n#define KAD_STATIC_OFFSETS ", padded_list(s.static_ndrange->offsets, 0),
                    "\n");
  }
  absl::StrAppend(&out, "#define KAD_STATIC_WORKGROUP ", s.static_workgroup ? 1 : 0, "\n");
  if (s.static_workgroup) {
    absl::StrAppend(&out, "#define KAD_STATIC_GROUPSIZE ", padded_list(*s.static_workgroup, 1),
                    "\n");
  }
  absl::StrAppend(&out, "#define KAD_STATIC_BLOCKS ", s.static_blocks ? 1 : 0, "\n");
  if (s.static_blocks) {
    absl::StrAppend(&out, "#define KAD_STATIC_NGROUPS ", padded_list(*s.static_blocks, 1), "\n");
  }
  absl::StrAppend(&out, "#define KAD_CHECK_BOUNDS ", s.check_bounds ? 1 : 0, "\n");
  return out;
}

std::string specialised_source(const Specialization& spec, absl::string_view user_source) {
  return absl::StrCat(specialization_defines(spec), prelude_source(), "\n#line 1\n", user_source,
                      "\n");
}

std::string SpecializationKey::canonical() const {
  const Specialization& s = spec;
  return absl::StrCat("module ", module_digest, "\nentry ", entry, "\nsignature ", signature,
                      "\ndevice ", device_id, "\nchoice ", to_string(s.choice), "\nstatic-ndrange ",
                      s.static_ndrange ? absl::StrCat(to_string(s.static_ndrange->extents), "@",
                                                      to_string(s.static_ndrange->offsets))
                                       : "dynamic",
                      "\nstatic-workgroup ",
                      s.static_workgroup ? to_string(*s.static_workgroup) : "dynamic",
                      "\nstatic-blocks ", s.static_blocks ? to_string(*s.static_blocks) : "dynamic",
                      "\ncheck-bounds ", s.check_bounds ? 1 : 0, "\noptions ", compiler_options,
                      "\ntoolchain ", toolchain_version, "\nprelude ", prelude_digest(), "\n");
}

}  // namespace kad
