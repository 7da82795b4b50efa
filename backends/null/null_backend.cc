#include "backends/null/null_backend.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"

namespace kad::null_backend {
namespace {

// 1. Buffers: device memory. Here it is host memory, owned by the buffer,
// counted against the device's memory (`in_use`) while the buffer lives.
class NullBuffer final : public Buffer {
 public:
  NullBuffer(const Device& device, uint64_t bytes, std::atomic<uint64_t>& in_use)
      : device_(device), bytes_(bytes, std::byte{0}), in_use_(in_use) {}
  ~NullBuffer() override { in_use_.fetch_sub(bytes_.size()); }
  uint64_t size() const override { return bytes_.size(); }
  const Device& device() const override { return device_; }
  std::byte* data() { return bytes_.data(); }
  const std::byte* data() const { return bytes_.data(); }

 private:
  const Device& device_;
  std::vector<std::byte> bytes_;  // zeroed: fresh memory never shows an earlier owner's bytes
  std::atomic<uint64_t>& in_use_;
};

// 2. Compiled kernels: what the driver built, and the limits the pipeline
// tunes against. A null kernel is built from nothing.
class NullKernel final : public CompiledKernel {
 public:
  explicit NullKernel(const DeviceLimits& device) {
    limits_.max_workgroup_size = device.max_workgroup_size;
    limits_.preferred_multiple = 1;
  }
  const KernelLimits& limits() const override { return limits_; }
  // The tuning hook: as many items per group as allowed (the launch does nothing).
  uint64_t launch_configuration(uint64_t nitems, uint64_t max_items) const override {
    return std::max<uint64_t>(1, std::min(nitems, max_items));
  }

 private:
  KernelLimits limits_;
};

// 3. Queues: in order. Every command is complete when it returns, so an
// event is complete as soon as it is issued; waits only check the id.
class NullQueue final : public Queue {
 public:
  explicit NullQueue(Device& device) : device_(device) {}
  Device& device() const override { return device_; }
  absl::StatusOr<EventId> enqueue_kernel(CompiledKernel&, const LaunchGeometry&,
                                         const LaunchContext&,
                                         std::span<const KernelArg>) override {
    return next_++;  // the warm path: allocates nothing
  }
  absl::Status write_buffer(Buffer& buffer, uint64_t offset,
                            std::span<const std::byte> data) override {
    return write_buffer_pieces(buffer, offset, {&data, 1});
  }
  // Optional: a transfer that arrived in pieces, each copied into place
  // (the default gathers them first, for a driver call that takes one block).
  absl::Status write_buffer_pieces(Buffer& buffer, uint64_t offset,
                                   std::span<const std::span<const std::byte>> pieces) override {
    if (absl::Status s = check_transfer(*this, buffer, offset, size_of_pieces(pieces)); !s.ok())
      return s;
    copy_pieces(static_cast<NullBuffer&>(buffer).data() + offset, pieces);
    return absl::OkStatus();
  }
  absl::Status read_buffer(const Buffer& buffer, uint64_t offset,
                           std::span<std::byte> data) override {
    if (absl::Status s = check_transfer(*this, buffer, offset, data.size()); !s.ok()) return s;
    if (!data.empty())
      std::memcpy(data.data(), static_cast<const NullBuffer&>(buffer).data() + offset, data.size());
    return absl::OkStatus();
  }
  absl::Status wait(EventId event) override {
    if (event == 0) return absl::OkStatus();
    return check_issued(event, next_);
  }
  absl::Status finish() override { return absl::OkStatus(); }
  // Optional: a launch that ended, told without waiting (a scheduled
  // queue's slots come free), and its end called back (a worker needs no
  // thread to wait for it). Here every issued launch has ended.
  bool ended(EventId event) override { return event < next_; }
  bool notify_ended(EventId event, EndCallback* callback) override {
    if (event == 0 || event >= next_) return false;
    callback->ended(callback, absl::OkStatus());
    return true;
  }

 private:
  Device& device_;
  EventId next_ = 1;
};

// 4. The device: its description and limits (queried once, at start), and
// the factories for the above.
class NullDevice final : public Device {
 public:
  NullDevice() {
    info_.backend = "null";
    info_.id = "null:0";
    info_.name = "null device (kernels do nothing)";
    info_.vendor = "kad";
    info_.platform = "null";
    info_.driver_version = "1";
    info_.is_cpu = false;  // not the default device, and served in kad's own process
    info_.host_visible = false;
    DeviceLimits& l = info_.limits;
    l.max_workgroup_size = 1024;
    l.max_workgroup_dims = {1024, 1024, 64};
    l.max_groups = {uint64_t{1} << 31, uint64_t{1} << 31, uint64_t{1} << 31};
    l.compute_units = 1;
    l.global_memory_bytes = uint64_t{256} << 20;
    l.max_allocation_bytes = uint64_t{256} << 20;
    l.local_memory_bytes = 64 << 10;
    l.max_parameter_bytes = 4096;
    info_.formats = {ModuleFormat::kOpenClC};
  }
  const DeviceInfo& info() const override { return info_; }
  // A device runs out of memory: the null device's is host memory, so its
  // bound also bounds what clients make kad hold through it.
  absl::StatusOr<std::unique_ptr<Buffer>> allocate(uint64_t bytes) override {
    if (absl::Status s = check_allocation(info_, bytes); !s.ok()) return s;
    const uint64_t limit = info_.limits.global_memory_bytes;
    uint64_t used = in_use_.load();
    do {
      if (bytes > limit - used) {
        return absl::ResourceExhaustedError(absl::StrFormat(
            "%s is out of memory: %d bytes asked, %d of %d in use", info_.id, bytes, used, limit));
      }
    } while (!in_use_.compare_exchange_weak(used, used + bytes));
    return std::make_unique<NullBuffer>(*this, bytes, in_use_);
  }
  absl::StatusOr<std::unique_ptr<Queue>> create_queue() override {
    return std::make_unique<NullQueue>(*this);
  }
  // A real backend hands request.source (or the lowered code) to its
  // compiler here and returns its log on failure.
  absl::StatusOr<std::unique_ptr<CompiledKernel>> compile(const CompileRequest&) override {
    return std::make_unique<NullKernel>(info_.limits);
  }

 private:
  DeviceInfo info_;
  std::atomic<uint64_t> in_use_{0};  // bytes of the buffers alive
};

}  // namespace

BackendDiscovery discover() {
  BackendDiscovery found;
  found.devices.push_back(std::make_unique<NullDevice>());
  found.log.push_back("null: null:0, kernels that do nothing (--null-device)");
  return found;
}

}  // namespace kad::null_backend
