#include "core/kernel_lowering.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"

#ifndef KAD_BUILT_TOOLCHAIN_VERSION
#define KAD_BUILT_TOOLCHAIN_VERSION "unknown"
#endif

namespace kad {
namespace {

// Device code that `target` consumes as is. (A SPIR-V module is not: it is
// built against the prelude's linked form and needs its specialisation linked
// in, see Toolchain::lower_ir.)
bool is_native(ModuleFormat format, CodeTarget target) {
  switch (target) {
    case CodeTarget::kPtx:
      return format == ModuleFormat::kPtx || format == ModuleFormat::kCubin;
    case CodeTarget::kAmdgcn:
      return format == ModuleFormat::kAmdgcnCodeObject;
    case CodeTarget::kSpirv:
    case CodeTarget::kSpir:
      return false;
  }
  return false;
}

// Formats that only one kind of device runs.
bool is_device_code(ModuleFormat format) {
  return format == ModuleFormat::kPtx || format == ModuleFormat::kCubin ||
         format == ModuleFormat::kAmdgcnCodeObject;
}

}  // namespace

absl::string_view built_toolchain_version() { return KAD_BUILT_TOOLCHAIN_VERSION; }

absl::StatusOr<std::vector<LoweringTarget>> parse_lowering_targets(absl::string_view list) {
  std::vector<LoweringTarget> targets;
  for (absl::string_view item : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    const std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(item, ':');
    LoweringTarget t;
    t.cpu = std::string(parts.second);
    if (parts.first == "ptx")
      t.target = CodeTarget::kPtx;
    else if (parts.first == "spirv")
      t.target = CodeTarget::kSpirv;
    else if (parts.first == "amdgcn")
      t.target = CodeTarget::kAmdgcn;
    else if (parts.first == "spir")
      t.target = CodeTarget::kSpir;
    else {
      return absl::InvalidArgumentError(
          absl::StrFormat("unknown code target `%s` in `%s` (ptx:<sm>, spirv, amdgcn:<gfx>, spir)",
                          parts.first, list));
    }
    if ((t.target == CodeTarget::kPtx || t.target == CodeTarget::kAmdgcn) && t.cpu.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("code target `%s` needs an architecture, as in ptx:sm_80", item));
    }
    targets.push_back(std::move(t));
  }
  return targets;
}

KernelLowering::KernelLowering(absl::StatusOr<Toolchain> toolchain, CodeCache* cache,
                               std::vector<LoweringTarget> prelower)
    : toolchain_(std::move(toolchain)), cache_(cache), prelower_(std::move(prelower)) {
  version_ = toolchain_.ok() ? toolchain_->version() : std::string(built_toolchain_version());
}

namespace {

struct SharedCacheSettings {
  absl::Mutex mu;
  bool made ABSL_GUARDED_BY(mu) = false;
  std::optional<std::pair<std::string, uint64_t>> folder ABSL_GUARDED_BY(mu);
  std::string toolchain_version ABSL_GUARDED_BY(mu);
};

SharedCacheSettings& shared_cache_settings() {
  static SharedCacheSettings* settings = new SharedCacheSettings;
  return *settings;
}

}  // namespace

bool KernelLowering::configure_shared_cache(std::string folder, uint64_t max_bytes) {
  SharedCacheSettings& settings = shared_cache_settings();
  absl::MutexLock lock(&settings.mu);
  if (settings.made) return false;
  settings.folder.emplace(std::move(folder), max_bytes);
  return true;
}

bool KernelLowering::configure_known_toolchain_version(std::string version) {
  SharedCacheSettings& settings = shared_cache_settings();
  absl::MutexLock lock(&settings.mu);
  if (settings.made) return false;
  settings.toolchain_version = std::move(version);
  return true;
}

KernelLowering& KernelLowering::shared() {
  static CodeCache* cache = [] {
    SharedCacheSettings& settings = shared_cache_settings();
    absl::MutexLock lock(&settings.mu);
    settings.made = true;
    return settings.folder ? new CodeCache(settings.folder->first, settings.folder->second)
                           : new CodeCache(CodeCache::from_environment());
  }();
  static KernelLowering* lowering = [] {
    std::vector<LoweringTarget> prelower;
    if (const char* list = std::getenv("KAD_PRELOWER")) {
      absl::StatusOr<std::vector<LoweringTarget>> parsed = parse_lowering_targets(list);
      // A typo must not pass silently: it would leave the GPU node's cache cold.
      if (!parsed.ok()) {
        std::fprintf(stderr, "KAD_PRELOWER: %s\n", std::string(parsed.status().message()).c_str());
        std::abort();
      }
      prelower = *std::move(parsed);
    }
    std::string known_version;
    {
      SharedCacheSettings& settings = shared_cache_settings();
      absl::MutexLock lock(&settings.mu);
      known_version = settings.toolchain_version;
    }
    return new KernelLowering(Toolchain::find(known_version), cache, std::move(prelower));
  }();
  return *lowering;
}

std::string KernelLowering::code_key(const CompileRequest& request, CodeTarget target,
                                     absl::string_view cpu) const {
  SpecializationKey key = request.key;
  // Lowered code depends on the source, not on the signature a backend then
  // checks it against: kernels of any signature share it.
  key.signature.clear();
  key.device_id = absl::StrCat(code_target_name(target), " ", cpu);
  key.toolchain_version = absl::StrCat(version_, "; kad lowering ", kLoweringRevision);
  return key.canonical();
}

absl::StatusOr<std::string> KernelLowering::lower(const CompileRequest& request, CodeTarget target,
                                                  absl::string_view cpu) {
  const ModuleFormat format = request.module.format();
  if (is_native(format, target)) return request.module.bytes();
  if (is_device_code(format)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s`: a %s module cannot run on a device that consumes %s", request.signature.entry,
        module_format_name(format), code_target_name(target)));
  }
  const std::string key = code_key(request, target, cpu);
  if (std::optional<std::string> cached = cache_->load(key)) return *std::move(cached);
  absl::StatusOr<std::string> code = run_toolchain(request, target, cpu);
  if (!code.ok()) return code.status();
  cache_->store(key, *code);
  return code;
}

int KernelLowering::prelower(const CompileRequest& request) {
  SpecializationKey key = request.key;
  key.compiler_options = request.signature.build_options;
  const CompileRequest neutral{request.module, request.signature,   request.spec, key,
                               request.source, key.compiler_options};
  int done = 0;
  for (const LoweringTarget& t : prelower_) done += lower(neutral, t.target, t.cpu).ok() ? 1 : 0;
  return done;
}

absl::Status KernelLowering::verify(const Module& module) {
  const ModuleFormat format = module.format();
  if (format != ModuleFormat::kSpirv && format != ModuleFormat::kLlvmBitcodeSpir64) {
    return absl::OkStatus();
  }
  {
    absl::MutexLock lock(&verified_mu_);
    if (verified_.contains(module.digest())) return absl::OkStatus();
  }
  if (!toolchain_.ok()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "a %s module must be verified before a driver sees it, and kad has no toolchain to "
        "verify it: %s",
        module_format_name(format), toolchain_.status().message()));
  }
  if (absl::Status s = toolchain_->verify_ir(format, module.bytes(), limits()); !s.ok()) return s;
  absl::MutexLock lock(&verified_mu_);
  // Bounded: forgetting only costs a second verification.
  if (verified_.size() >= 4096) verified_.clear();
  verified_.insert(module.digest());
  return absl::OkStatus();
}

absl::StatusOr<std::string> KernelLowering::run_toolchain(const CompileRequest& request,
                                                          CodeTarget target,
                                                          absl::string_view cpu) const {
  if (!toolchain_.ok()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "kernel `%s`: no %s code for it in the cache (%s) and no toolchain to lower it: %s",
        request.signature.entry, code_target_name(target),
        cache_->enabled() ? cache_->folder() : "disabled", toolchain_.status().message()));
  }
  if (request.module.format() == ModuleFormat::kOpenClC) {
    return toolchain_->lower(target, request.source, cpu, request.options, limits());
  }
  return toolchain_->lower_ir(target, request.module.format(), request.module.bytes(),
                              specialization_defines(request.spec), cpu, request.options, limits());
}

void KernelLowering::set_limits(const ToolchainLimits& limits) {
  absl::MutexLock lock(&limits_mu_);
  limits_ = limits;
}

ToolchainLimits KernelLowering::limits() const {
  absl::MutexLock lock(&limits_mu_);
  return limits_;
}

}  // namespace kad
