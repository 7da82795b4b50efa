// An in-order queue: one AQL user-mode queue of the GPU agent.
//
// Every kernel dispatch sets the barrier bit, so packets run one after the
// other, and decrements one completion signal that starts at kSignalStart:
// event id e is complete once the signal is at most kSignalStart - e. One
// signal per queue and a ring of kernarg slots (one per packet) mean a
// launch allocates nothing. Copies are blocking: they wait for every earlier
// dispatch, then go through a staging buffer the GPU can reach.
#pragma once

#include <atomic>
#include <cstddef>
#include <limits>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "backends/hsa/hsa_device.h"
#include "backends/hsa/hsa_headers.h"
#include "core/backend.h"

namespace kad::hsa {

class HsaQueue final : public Queue {
 public:
  static absl::StatusOr<std::unique_ptr<HsaQueue>> create(HsaDevice& device);
  ~HsaQueue() override;

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
  static constexpr hsa_signal_value_t kSignalStart = std::numeric_limits<hsa_signal_value_t>::max();
  static constexpr uint64_t kStagingBytes = uint64_t{8} << 20;

  explicit HsaQueue(HsaDevice& device) : device_(device) {}

  // Called by the runtime on its own thread when the queue fails (a kernel
  // faulted): the queue takes no more work and its waits report the error.
  static void on_error(hsa_status_t status, hsa_queue_t* queue, void* self);
  absl::Status failure() const;
  // Waits until dispatch `event` has completed, or the queue has failed.
  absl::Status wait_for(EventId event) const;
  // One blocking copy of at most kStagingBytes through the copy engine.
  absl::Status copy(void* dst, hsa_agent_t dst_agent, const void* src, hsa_agent_t src_agent,
                    size_t bytes);

  HsaDevice& device_;
  hsa_queue_t* queue_ = nullptr;
  hsa_signal_t done_{};  // decremented by every dispatch
  hsa_signal_t copied_{};
  std::byte* kernargs_ = nullptr;  // queue size slots of kKernargSlotBytes
  std::byte* staging_ = nullptr;
  uint32_t ring_ = 0;  // packets in the queue, and kernarg slots
  std::atomic<int> error_{HSA_STATUS_SUCCESS};
  absl::Mutex mu_;  // orders submissions: dispatches and copies
  EventId next_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace kad::hsa
