#include "backends/level_zero/level_zero_kernel.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/level_zero/level_zero_launch.h"
#include "backends/level_zero/level_zero_status.h"
#include "core/driver_scope.h"

namespace kad::level_zero {
namespace {

// The driver's build log for a failed (or warning) module build; empty when
// there is none. Destroys the log either way.
std::string take_build_log(const LevelZeroApi& api, ze_module_build_log_handle_t log) {
  if (log == nullptr) return {};
  std::string text;
  size_t size = 0;
  if (api.zeModuleBuildLogGetString(log, &size, nullptr) == ZE_RESULT_SUCCESS && size > 0) {
    text.resize(size);
    if (api.zeModuleBuildLogGetString(log, &size, text.data()) != ZE_RESULT_SUCCESS) text.clear();
    text.resize(std::min(text.size(), text.find('\0')));
  }
  api.zeModuleBuildLogDestroy(log);
  return text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LevelZeroKernel>> LevelZeroKernel::build(
    LevelZeroDevice& device, const CompileRequest& request, absl::string_view spirv) {
  const LevelZeroApi& api = device.api();
  const KernelSignature& sig = request.signature;
  const std::string where =
      absl::StrFormat("kernel `%s` on %s (%s)", sig.entry, device.info().id, device.info().name);
  std::unique_ptr<LevelZeroKernel> k(new LevelZeroKernel(device, sig.entry));
  DriverScope driver;

  ze_module_desc_t module_desc{};
  module_desc.stype = ZE_STRUCTURE_TYPE_MODULE_DESC;
  module_desc.format = ZE_MODULE_FORMAT_IL_SPIRV;
  module_desc.inputSize = spirv.size();
  module_desc.pInputModule = reinterpret_cast<const uint8_t*>(spirv.data());
  // The request's options are clang's: they shaped the SPIR-V already, and
  // the driver's compiler would reject most of them (-D, -I).
  module_desc.pBuildFlags = "";
  ze_module_build_log_handle_t log = nullptr;
  ze_result_t r =
      api.zeModuleCreate(device.context(), device.handle(), &module_desc, &k->module_, &log);
  const std::string build_log = take_build_log(api, log);
  if (r != ZE_RESULT_SUCCESS) {
    k->module_ = nullptr;
    return ze_status(r, "zeModuleCreate",
                     build_log.empty() ? where : absl::StrCat(where, "; build log:\n", build_log));
  }

  ze_kernel_desc_t kernel_desc{};
  kernel_desc.stype = ZE_STRUCTURE_TYPE_KERNEL_DESC;
  kernel_desc.pKernelName = sig.entry.c_str();
  r = api.zeKernelCreate(k->module_, &kernel_desc, &k->kernel_);
  if (r == ZE_RESULT_ERROR_INVALID_KERNEL_NAME) {
    k->kernel_ = nullptr;
    return absl::NotFoundError(
        absl::StrFormat("%s: the module has no kernel named `%s`", where, sig.entry));
  }
  if (r != ZE_RESULT_SUCCESS) {
    k->kernel_ = nullptr;
    return ze_status(r, "zeKernelCreate", where);
  }

  ze_kernel_properties_t properties{};
  properties.stype = ZE_STRUCTURE_TYPE_KERNEL_PROPERTIES;
  if (absl::Status s = ze_status(api.zeKernelGetProperties(k->kernel_, &properties),
                                 "zeKernelGetProperties", where);
      !s.ok()) {
    return s;
  }
  if (properties.numKernelArgs != sig.args.size() + 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s has %d parameters after KAD_CONTEXT, its signature declares %d", where,
        properties.numKernelArgs == 0 ? 0 : properties.numKernelArgs - 1, sig.args.size()));
  }
  k->limits_ = kernel_limits(properties, device.info().limits);
  return k;
}

LevelZeroKernel::~LevelZeroKernel() {
  const LevelZeroApi& api = device_.api();
  if (kernel_) api.zeKernelDestroy(kernel_);
  if (module_) api.zeModuleDestroy(module_);
}

uint64_t LevelZeroKernel::launch_configuration(uint64_t nitems, uint64_t max_items) const {
  const uint64_t multiple = limits_.preferred_multiple;
  uint32_t x = 0, y = 0, z = 0;
  uint64_t suggested = 0;
  {
    DriverScope driver;
    if (device_.api().zeKernelSuggestGroupSize(kernel_, suggestion_extent(nitems, multiple), 1, 1,
                                               &x, &y, &z) == ZE_RESULT_SUCCESS) {
      suggested = x;
    }
  }
  return tuned_group_size(suggested, nitems, multiple,
                          std::min(limits_.max_workgroup_size, max_items));
}

}  // namespace kad::level_zero
