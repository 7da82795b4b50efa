// An in-order OpenCL command queue. Launch events live in a fixed ring
// indexed by event id, so recording one allocates nothing in kad's code.
// Queues are made with profiling on (unless the device says otherwise: a
// worker's): the fair-share scheduler charges each launch its time on the
// device, from the event's timestamps (the device's clock, shared by its queues).
#pragma once

#include <array>

#include "absl/synchronization/mutex.h"
#include "backends/opencl/cl.h"
#include "backends/opencl/opencl_device.h"
#include "core/backend.h"

namespace kad::opencl {

class OpenClQueue final : public Queue {
 public:
  static absl::StatusOr<std::unique_ptr<OpenClQueue>> create(OpenClDevice& device);
  ~OpenClQueue() override;

  Device& device() const override { return device_; }
  absl::StatusOr<EventId> enqueue_kernel(CompiledKernel& kernel, const LaunchGeometry& geometry,
                                         const LaunchContext& context,
                                         std::span<const KernelArg> args) override;
  absl::Status write_buffer(Buffer& buffer, uint64_t offset,
                            std::span<const std::byte> data) override;
  absl::Status read_buffer(const Buffer& buffer, uint64_t offset,
                           std::span<std::byte> data) override;
  absl::Status wait(EventId event) override;
  // The launch's own event, waited for and released: none kept in the
  // ring, no flush, no second lock (PoCL takes a lock per call).
  absl::Status run_kernel(CompiledKernel& kernel, const LaunchGeometry& geometry,
                          const LaunchContext& context, std::span<const KernelArg> args) override;
  absl::Status finish() override;
  std::optional<DeviceTimes> device_times(EventId event) override;
  bool ended(EventId event) override;
  bool notify_ended(EventId event, EndCallback* callback) override;

 private:
  // Events older than this many launches are released; waiting for one waits
  // for the oldest event still held, which (in order) completes after it.
  static constexpr uint64_t kRing = 1024;

  OpenClQueue(OpenClDevice& device, cl_command_queue queue) : device_(device), queue_(queue) {}
  EventId record(cl_event event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for `event`, which the caller holds a reference to, and releases
  // it: its launch's failure, or the wait's.
  absl::Status wait_and_release(cl_event event);
  // Sets the arguments and enqueues the launch, its event in `*event`.
  absl::Status enqueue(CompiledKernel& compiled, const LaunchGeometry& geometry,
                       const LaunchContext& context, std::span<const KernelArg> args,
                       cl_event* event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  OpenClDevice& device_;
  cl_command_queue queue_;
  absl::Mutex mu_;
  std::array<cl_event, kRing> ring_ ABSL_GUARDED_BY(mu_){};
  EventId next_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace kad::opencl
