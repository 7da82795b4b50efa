#include "backends/cuda/cuda_kernel.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_launch_configuration.h"
#include "backends/cuda/cuda_status.h"
#include "core/driver_scope.h"
#include "core/kernel_lowering.h"

namespace kad::cuda {
namespace {

constexpr size_t kLogBytes = 16 * 1024;

bool is_lowered(ModuleFormat format) {
  return format != ModuleFormat::kPtx && format != ModuleFormat::kCubin;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaKernel>> CudaKernel::build(CudaDevice& device,
                                                              const CompileRequest& request) {
  const KernelSignature& sig = request.signature;
  const bool lowered = is_lowered(request.module.format());
  std::vector<int> local_params;  // PTX parameter indices: the context is parameter 0
  for (size_t i = 0; i < sig.args.size(); ++i) {
    if (sig.args[i].kind != ArgKind::kLocal) continue;
    if (!lowered) {
      return absl::UnimplementedError(absl::StrFormat(
          "kernel `%s`: argument %d is local memory sized at launch, which a %s module cannot "
          "take on CUDA devices (%s); use OpenCL C, or shared memory of fixed size",
          sig.entry, i, module_format_name(request.module.format()), device.info().id));
    }
    local_params.push_back(static_cast<int>(i) + 1);
  }
  absl::StatusOr<std::string> code =
      KernelLowering::shared().lower(request, CodeTarget::kPtx, device.ptx_target());
  if (!code.ok()) return code.status();
  if (request.module.format() != ModuleFormat::kCubin) {
    absl::StatusOr<size_t> count = ptx_parameter_count(*code, sig.entry);
    if (!count.ok()) return count.status();
    if (*count != sig.args.size() + 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "kernel `%s` has %d parameters after KAD_CONTEXT, its signature declares %d", sig.entry,
          *count == 0 ? 0 : *count - 1, sig.args.size()));
    }
  }

  // A static workgroup size is the kernel's maximum thread count: in the PTX
  // (.maxntid) for lowered code, and as the JIT's target block size.
  unsigned threads_per_block = 0;
  if (const auto fixed = static_hardware_workgroup(request.spec)) {
    const std::array<uint64_t, 3>& block = *fixed;
    threads_per_block = static_cast<unsigned>(block[0] * block[1] * block[2]);
    if (lowered) {
      absl::StatusOr<std::string> bounded = with_max_threads(*code, sig.entry, block);
      if (!bounded.ok()) return bounded.status();
      code = std::move(bounded);
    }
  }
  if (!local_params.empty()) {
    absl::StatusOr<std::string> windowed = with_dynamic_local(*code, sig.entry, local_params);
    if (!windowed.ok()) return windowed.status();
    code = std::move(windowed);
  }

  if (absl::Status s = device.make_current(); !s.ok()) return s;
  const CudaApi& cu = device.api();
  std::unique_ptr<CudaKernel> kernel(new CudaKernel(device, sig.entry));
  std::vector<char> error_log(kLogBytes, '\0'), info_log(kLogBytes, '\0');
  std::vector<int> options = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                              CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  std::vector<void*> values = {error_log.data(), reinterpret_cast<void*>(kLogBytes - 1),
                               info_log.data(), reinterpret_cast<void*>(kLogBytes - 1)};
  if (threads_per_block != 0) {
    options.push_back(CU_JIT_THREADS_PER_BLOCK);
    values.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(threads_per_block)));
  }
  // cuModuleLoadData takes PTX as a NUL-terminated string.
  code->push_back('\0');
  {
    DriverScope driver;
    const CUresult loaded =
        cu.cuModuleLoadDataEx(&kernel->module_, code->data(), static_cast<unsigned>(options.size()),
                              options.data(), values.data());
    if (loaded != CUDA_SUCCESS) {
      return cu_status(
          cu, loaded, "cuModuleLoadDataEx",
          absl::StrFormat("kernel `%s` on %s:\n%s", sig.entry, device.info().id, error_log.data()));
    }
    const CUresult found =
        cu.cuModuleGetFunction(&kernel->function_, kernel->module_, sig.entry.c_str());
    if (found != CUDA_SUCCESS) {
      return cu_status(cu, found, "cuModuleGetFunction",
                       absl::StrFormat("the module has no kernel `%s`", sig.entry));
    }
  }
  int max_threads = 0, shared = 0;
  if (absl::Status s =
          cu_status(cu,
                    cu.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                          kernel->function_),
                    "cuFuncGetAttribute", sig.entry);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = cu_status(
          cu,
          cu.cuFuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, kernel->function_),
          "cuFuncGetAttribute", sig.entry);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = cu_status(cu,
                                 cu.cuOccupancyMaxPotentialBlockSize(
                                     &kernel->occupancy_min_grid_, &kernel->occupancy_block_,
                                     kernel->function_, nullptr, 0, 0),
                                 "cuOccupancyMaxPotentialBlockSize", sig.entry);
      !s.ok()) {
    return s;
  }
  kernel->limits_.max_workgroup_size = static_cast<uint64_t>(max_threads);
  kernel->limits_.preferred_multiple = device.info().limits.subgroup_width;
  kernel->limits_.local_memory_bytes = static_cast<uint64_t>(shared);
  return kernel;
}

CudaKernel::~CudaKernel() {
  if (module_ != nullptr && device_.make_current().ok()) device_.api().cuModuleUnload(module_);
}

uint64_t CudaKernel::launch_configuration(uint64_t nitems, uint64_t max_items) const {
  return occupancy_threads(nitems, std::min(max_items, limits_.max_workgroup_size),
                           occupancy_block_, occupancy_min_grid_, device_.options().prefer_blocks);
}

}  // namespace kad::cuda
