#include "backends/cuda/cuda_queue.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_buffer.h"
#include "backends/cuda/cuda_kernel.h"
#include "backends/cuda/cuda_launch_configuration.h"
#include "backends/cuda/cuda_status.h"
#include "core/driver_scope.h"
#include "core/kernel.h"

namespace kad::cuda {

absl::StatusOr<std::unique_ptr<CudaQueue>> CudaQueue::create(CudaDevice& device) {
  if (absl::Status s = device.make_current(); !s.ok()) return s;
  const CudaApi& cu = device.api();
  CUstream stream = nullptr;
  if (absl::Status s = cu_status(cu, cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
                                 "cuStreamCreate", device.info().id);
      !s.ok()) {
    return s;
  }
  std::unique_ptr<CudaQueue> queue(new CudaQueue(device, stream));
  absl::MutexLock lock(&queue->mu_);
  for (CUevent& e : queue->ring_) {
    if (absl::Status s = cu_status(cu, cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING),
                                   "cuEventCreate", device.info().id);
        !s.ok()) {
      return s;
    }
  }
  return queue;
}

CudaQueue::~CudaQueue() {
  if (!device_.make_current().ok()) return;
  const CudaApi& cu = device_.api();
  cu.cuStreamSynchronize(stream_);
  absl::MutexLock lock(&mu_);
  for (CUevent e : ring_)
    if (e != nullptr) cu.cuEventDestroy(e);
  cu.cuStreamDestroy(stream_);
}

absl::StatusOr<EventId> CudaQueue::enqueue_kernel(CompiledKernel& compiled,
                                                  const LaunchGeometry& geometry,
                                                  const LaunchContext& context,
                                                  std::span<const KernelArg> args) {
  // Core validated the arguments against this device: buffers are ours, and
  // local memory fits the device.
  const auto& kernel = static_cast<const CudaKernel&>(compiled);
  void* params[kMaxKernelArgs + 1];
  uint64_t local_offsets[kMaxKernelArgs];  // into the launch's dynamic shared memory
  uint64_t local_bytes = 0;
  params[0] = const_cast<LaunchContext*>(&context);
  for (size_t i = 0; i < args.size(); ++i) {
    const KernelArg& a = args[i];
    if (a.kind == ArgKind::kLocal) {
      // See with_dynamic_local: the kernel adds the window's base itself.
      local_offsets[i] = local_bytes;
      local_bytes += (a.local_bytes + kLocalAlignment - 1) / kLocalAlignment * kLocalAlignment;
      params[i + 1] = &local_offsets[i];
    } else if (a.kind == ArgKind::kScalar) {
      params[i + 1] = const_cast<uint64_t*>(&a.bits);  // little end first: any scalar size
    } else {
      params[i + 1] =
          const_cast<CUdeviceptr*>(&static_cast<const CudaBuffer*>(a.buffer)->pointer());
    }
  }
  if (absl::Status s = device_.make_current(); !s.ok()) return s;
  const CudaApi& cu = device_.api();
  absl::MutexLock lock(&mu_);
  DriverScope driver;
  const CUresult launched = cu.cuLaunchKernel(
      kernel.function(), static_cast<unsigned>(geometry.groups[0]),
      static_cast<unsigned>(geometry.groups[1]), static_cast<unsigned>(geometry.groups[2]),
      static_cast<unsigned>(geometry.items[0]), static_cast<unsigned>(geometry.items[1]),
      static_cast<unsigned>(geometry.items[2]), static_cast<unsigned>(local_bytes), stream_, params,
      nullptr);
  if (launched != CUDA_SUCCESS) {
    return cu_status(
        cu, launched, "cuLaunchKernel",
        absl::StrFormat("kernel `%s`, blocks (%d, %d, %d), threads (%d, %d, %d)", kernel.name(),
                        geometry.groups[0], geometry.groups[1], geometry.groups[2],
                        geometry.items[0], geometry.items[1], geometry.items[2]));
  }
  const EventId id = next_;
  if (absl::Status s = cu_status(cu, cu.cuEventRecord(ring_[id % kRing], stream_), "cuEventRecord",
                                 kernel.name());
      !s.ok()) {
    return s;
  }
  ++next_;
  return id;
}

absl::Status CudaQueue::synchronize(const char* what) {
  DriverScope driver;
  return cu_status(device_.api(), device_.api().cuStreamSynchronize(stream_), what,
                   device_.info().id);
}

absl::Status CudaQueue::write_buffer(Buffer& buffer, uint64_t offset,
                                     std::span<const std::byte> data) {
  if (absl::Status s = check_transfer(*this, buffer, offset, data.size()); !s.ok()) return s;
  if (data.empty()) return absl::OkStatus();
  if (absl::Status s = device_.make_current(); !s.ok()) return s;
  const CudaApi& cu = device_.api();
  {
    absl::MutexLock lock(&mu_);  // ordered after every launch submitted so far
    DriverScope driver;
    if (absl::Status s =
            cu_status(cu,
                      cu.cuMemcpyHtoDAsync(static_cast<CudaBuffer&>(buffer).pointer() + offset,
                                           data.data(), data.size(), stream_),
                      "cuMemcpyHtoDAsync", absl::StrCat(data.size(), " bytes"));
        !s.ok()) {
      return s;
    }
  }
  return synchronize("cuStreamSynchronize after a write");
}

absl::Status CudaQueue::read_buffer(const Buffer& buffer, uint64_t offset,
                                    std::span<std::byte> data) {
  if (absl::Status s = check_transfer(*this, buffer, offset, data.size()); !s.ok()) return s;
  if (data.empty()) return absl::OkStatus();
  if (absl::Status s = device_.make_current(); !s.ok()) return s;
  const CudaApi& cu = device_.api();
  {
    absl::MutexLock lock(&mu_);
    DriverScope driver;
    if (absl::Status s =
            cu_status(cu,
                      cu.cuMemcpyDtoHAsync(
                          data.data(), static_cast<const CudaBuffer&>(buffer).pointer() + offset,
                          data.size(), stream_),
                      "cuMemcpyDtoHAsync", absl::StrCat(data.size(), " bytes"));
        !s.ok()) {
      return s;
    }
  }
  return synchronize("cuStreamSynchronize after a read");
}

absl::Status CudaQueue::wait(EventId id) {
  if (id == 0) return absl::OkStatus();
  CUevent event;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = check_issued(id, next_); !s.ok()) return s;
    event = ring_[oldest_held_event(id, next_, kRing) % kRing];
  }
  if (absl::Status s = device_.make_current(); !s.ok()) return s;
  DriverScope driver;
  // A kernel that faulted reports here (and poisons the context: CUDA's errors
  // after a launch are sticky).
  return cu_status(device_.api(), device_.api().cuEventSynchronize(event), "kernel execution",
                   absl::StrFormat("waiting for event %d on %s", id, device_.info().id));
}

bool CudaQueue::ended(EventId id) {
  if (id == 0) return true;
  CUevent event;
  {
    absl::MutexLock lock(&mu_);
    if (id >= next_) return false;
    event = ring_[oldest_held_event(id, next_, kRing) % kRing];
  }
  if (!device_.make_current().ok()) return false;
  DriverScope driver;
  // CUDA_ERROR_NOT_READY while it runs; a fault's error is for wait() to report.
  return device_.api().cuEventQuery(event) == CUDA_SUCCESS;
}

absl::Status CudaQueue::finish() {
  if (absl::Status s = device_.make_current(); !s.ok()) return s;
  return synchronize("cuStreamSynchronize");
}

}  // namespace kad::cuda
