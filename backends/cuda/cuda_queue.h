// An in-order queue on a CUDA device: one stream, and a fixed ring of events
// indexed by event id, so recording a launch allocates nothing in kad's code.
#pragma once

#include <array>

#include "absl/synchronization/mutex.h"
#include "backends/cuda/cuda_device.h"
#include "core/backend.h"

namespace kad::cuda {

class CudaQueue final : public Queue {
 public:
  static absl::StatusOr<std::unique_ptr<CudaQueue>> create(CudaDevice& device);
  ~CudaQueue() override;

  Device& device() const override { return device_; }
  absl::StatusOr<EventId> enqueue_kernel(CompiledKernel& kernel, const LaunchGeometry& geometry,
                                         const LaunchContext& context,
                                         std::span<const KernelArg> args) override;
  absl::Status write_buffer(Buffer& buffer, uint64_t offset,
                            std::span<const std::byte> data) override;
  absl::Status read_buffer(const Buffer& buffer, uint64_t offset,
                           std::span<std::byte> data) override;
  absl::Status wait(EventId event) override;
  absl::Status finish() override;
  bool ended(EventId event) override;

 private:
  // An event is re-recorded this many launches later; waiting for an older
  // one waits for the oldest still held, which (in order) completes after it.
  static constexpr uint64_t kRing = 256;

  CudaQueue(CudaDevice& device, CUstream stream) : device_(device), stream_(stream) {}
  absl::Status synchronize(const char* what);

  CudaDevice& device_;
  CUstream stream_;
  absl::Mutex mu_;
  std::array<CUevent, kRing> ring_ ABSL_GUARDED_BY(mu_){};
  EventId next_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace kad::cuda
