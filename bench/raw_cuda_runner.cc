// raw/ on a CUDA device: the OpenCL raw runner's twin in the CUDA Driver API.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_status.h"
#include "bench/runner.h"
#include "core/driver_scope.h"
#include "core/kernel_lowering.h"
#include "core/module.h"

namespace kad_bench {
namespace {

// The CUDA Driver API, loaded once per process.
absl::StatusOr<std::shared_ptr<const kad::cuda::CudaApi>> cuda_api() {
  static auto* api = new absl::StatusOr<std::shared_ptr<const kad::cuda::CudaApi>>(
      kad::cuda::CudaApi::load("libcuda.so.1"));
  return *api;
}

// The largest divisor of `extent` that is at most `limit` (at least 1).
int64_t largest_divisor_at_most(int64_t extent, int64_t limit) {
  for (int64_t d = std::min(extent, std::max<int64_t>(limit, 1)); d > 1; --d)
    if (extent % d == 0) return d;
  return 1;
}

// raw/ on a CUDA device: the OpenCL raw runner's twin in the CUDA Driver API.
// Setup (not timed) lowers the raw kernel to PTX with kad's toolchain or
// cache; launch() and wait() are only cuLaunchKernel on a stream and
// cuStreamSynchronize — no kad code in the timed path.
class CudaRawRunner final : public Runner {
 public:
  explicit CudaRawRunner(int ordinal) : ordinal_(ordinal) {}
  ~CudaRawRunner() override {
    if (api_ == nullptr || context_ == nullptr) return;
    const kad::cuda::CudaApi& cu = *api_;
    cu.cuCtxSetCurrent(context_);
    if (stream_) {
      cu.cuStreamSynchronize(stream_);
      cu.cuStreamDestroy(stream_);
    }
    for (kad::cuda::CUdeviceptr p : mems_) cu.cuMemFree(p);
    if (module_) cu.cuModuleUnload(module_);
    cu.cuDevicePrimaryCtxRelease(device_);
  }

  absl::Status setup(const Work& w) override {
    using namespace kad::cuda;
    absl::StatusOr<std::string> ptx = raw_ptx(w);
    if (!ptx.ok()) return ptx.status();
    absl::StatusOr<std::shared_ptr<const CudaApi>> api = cuda_api();
    if (!api.ok()) return api.status();
    api_ = *api;
    const CudaApi& cu = *api_;
    if (absl::Status s = cu_status(cu, cu.cuInit(0), "cuInit"); !s.ok()) return s;
    if (absl::Status s = cu_status(cu, cu.cuDeviceGet(&device_, ordinal_), "cuDeviceGet");
        !s.ok()) {
      return s;
    }
    // The device's primary context: the one kad's CUDA backend uses too.
    if (absl::Status s = cu_status(cu, cu.cuDevicePrimaryCtxRetain(&context_, device_),
                                   "cuDevicePrimaryCtxRetain");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = cu_status(cu, cu.cuCtxSetCurrent(context_), "cuCtxSetCurrent"); !s.ok())
      return s;

    // cuModuleLoadDataEx takes PTX as a NUL-terminated string.
    ptx->push_back('\0');
    char error_log[8192] = {};
    int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {error_log, reinterpret_cast<void*>(sizeof(error_log) - 1)};
    if (absl::Status s =
            cu_status(cu, cu.cuModuleLoadDataEx(&module_, ptx->data(), 2, options, values),
                      "cuModuleLoadDataEx", error_log);
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            cu_status(cu, cu.cuModuleGetFunction(&function_, module_, w.kernel.c_str()),
                      "cuModuleGetFunction", w.kernel);
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            cu_status(cu, cu.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        !s.ok()) {
      return s;
    }

    // Buffers, zeroed once (cuMemcpy from the host), as the kernels read them.
    const size_t bytes = static_cast<size_t>(w.items()) * w.element_bytes();
    const std::vector<char> zeros(bytes, 0);
    const std::string layout = w.layout();
    for (char c : layout) {
      if (c == 'S') continue;
      CUdeviceptr p = 0;
      if (absl::Status s = cu_status(cu, cu.cuMemAlloc(&p, bytes), "cuMemAlloc"); !s.ok()) return s;
      mems_.push_back(p);
      if (absl::Status s = cu_status(cu, cu.cuMemcpyHtoDAsync(p, zeros.data(), bytes, stream_),
                                     "cuMemcpyHtoDAsync");
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = cu_status(cu, cu.cuStreamSynchronize(stream_), "cuStreamSynchronize");
        !s.ok()) {
      return s;
    }
    // cuLaunchKernel's parameters: pointers to each argument's value, all
    // made here so that launch() only launches.
    size_t m = 0;
    for (char c : layout) {
      if (c != 'S')
        params_.push_back(&mems_[m++]);
      else if (w.double_scalar())
        params_.push_back(&scalar_d_);
      else
        params_.push_back(&scalar_f_);
    }

    // The block shape. A given workgroup size is the block, as the OpenCL raw
    // runner passes it as the local size. None given: the OpenCL runner
    // passes no local size and the driver picks one that divides the global
    // size; here the driver's occupancy suggestion (cuOccupancyMaxPotentialBlockSize,
    // no dynamic shared memory) is the budget of threads, spent dimension 0
    // first on the largest divisor of each extent — the raw kernels have no
    // bounds check, so every block must be full.
    const size_t rank = w.shape.ndrange.size();
    if (rank < 1 || rank > 3)
      return absl::InvalidArgumentError(absl::StrCat("raw/ on CUDA: rank ", rank, " is not 1-3"));
    if (!w.shape.workgroup.empty()) {
      for (size_t d = 0; d < rank; ++d)
        block_[d] = d < w.shape.workgroup.size() ? static_cast<unsigned>(w.shape.workgroup[d]) : 1;
    } else {
      int min_grid = 0, threads = 0;
      if (absl::Status s = cu_status(
              cu,
              cu.cuOccupancyMaxPotentialBlockSize(&min_grid, &threads, function_, nullptr, 0, 0),
              "cuOccupancyMaxPotentialBlockSize");
          !s.ok()) {
        return s;
      }
      int64_t budget = std::max(threads, 1);
      for (size_t d = 0; d < rank; ++d) {
        const int64_t b = largest_divisor_at_most(w.shape.ndrange[d], budget);
        block_[d] = static_cast<unsigned>(b);
        budget = std::max<int64_t>(budget / b, 1);
      }
    }
    for (size_t d = 0; d < rank; ++d) {
      const int64_t extent = w.shape.ndrange[d];
      if (block_[d] == 0 || extent % block_[d] != 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "raw/ on CUDA: workgroup size %d does not divide extent %d of dimension %d (the raw "
            "kernels have no bounds check)",
            block_[d], extent, d));
      }
      grid_[d] = static_cast<unsigned>(extent / block_[d]);
    }
    return absl::OkStatus();
  }

  // Everything here is the driver's: DriverScope keeps it out of kad_allocs.
  absl::Status launch() override {
    kad::DriverScope driver;
    const kad::cuda::CUresult r =
        api_->cuLaunchKernel(function_, grid_[0], grid_[1], grid_[2], block_[0], block_[1],
                             block_[2], 0, stream_, params_.data(), nullptr);
    if (r != kad::cuda::CUDA_SUCCESS) return kad::cuda::cu_status(*api_, r, "cuLaunchKernel");
    return absl::OkStatus();
  }
  absl::Status wait() override {
    kad::DriverScope driver;
    const kad::cuda::CUresult r = api_->cuStreamSynchronize(stream_);
    if (r != kad::cuda::CUDA_SUCCESS) return kad::cuda::cu_status(*api_, r, "cuStreamSynchronize");
    return absl::OkStatus();
  }

 private:
  int ordinal_;
  std::shared_ptr<const kad::cuda::CudaApi> api_;
  kad::cuda::CUdevice device_ = 0;
  kad::cuda::CUcontext context_ = nullptr;
  kad::cuda::CUmodule module_ = nullptr;
  kad::cuda::CUfunction function_ = nullptr;
  kad::cuda::CUstream stream_ = nullptr;
  std::vector<kad::cuda::CUdeviceptr> mems_;
  std::vector<void*> params_;
  float scalar_f_ = 2.0f;
  double scalar_d_ = 2.0;
  unsigned grid_[3] = {1, 1, 1}, block_[3] = {1, 1, 1};
};

}  // namespace

absl::StatusOr<std::string> raw_ptx(const Work& w) {
  const std::string source = w.source(true);
  absl::StatusOr<std::shared_ptr<const kad::Module>> module =
      kad::Module::create(kad::ModuleFormat::kOpenClC, source);
  if (!module.ok()) return module.status();
  const kad::KernelSignature signature{w.kernel, std::nullopt, std::nullopt, {}, ""};
  const kad::Specialization spec{};
  kad::SpecializationKey key;
  key.module_digest = (*module)->digest();
  key.entry = w.kernel;
  key.spec = spec;
  // The raw source is the whole program (no defines, no prelude); no options.
  const kad::CompileRequest request{**module, signature, spec, key, source, ""};
  return kad::KernelLowering::shared().lower(request, kad::CodeTarget::kPtx, kRawPtxTarget);
}

std::unique_ptr<Runner> make_cuda_raw_runner(int ordinal) {
  return std::make_unique<CudaRawRunner>(ordinal);
}

}  // namespace kad_bench
