#include "backends/hsa/hsa_queue.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "backends/hsa/hsa_buffer.h"
#include "backends/hsa/hsa_kernarg.h"
#include "backends/hsa/hsa_kernel.h"
#include "backends/hsa/hsa_status.h"
#include "core/driver_scope.h"

namespace kad::hsa {
namespace {

// A kernel dispatch that waits for the one before it (barrier) and makes its
// memory visible to the host and to copies (system-scope fences).
constexpr uint16_t kDispatchHeader =
    (HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE) | (1 << HSA_PACKET_HEADER_BARRIER) |
    (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
    (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE);
// kad always dispatches three dimensions (LaunchGeometry pads with 1s).
constexpr uint16_t kDispatchSetup = 3 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS;

}  // namespace

absl::StatusOr<std::unique_ptr<HsaQueue>> HsaQueue::create(HsaDevice& device) {
  std::unique_ptr<HsaQueue> q(new HsaQueue(device));
  const HsaApi& api = device.api();
  DriverScope driver;
  if (absl::Status s = hsa_status(
          api.hsa_queue_create(device.agent(), device.queue_size(), HSA_QUEUE_TYPE_MULTI,
                               &HsaQueue::on_error, q.get(), UINT32_MAX, UINT32_MAX, &q->queue_),
          "hsa_queue_create", device.info().id);
      !s.ok()) {
    return s;
  }
  q->ring_ = q->queue_->size;
  for (auto [signal, initial] : {std::pair{&q->done_, kSignalStart}, {&q->copied_, 0}}) {
    if (absl::Status s = hsa_status(api.hsa_signal_create(initial, 0, nullptr, signal),
                                    "hsa_signal_create", device.info().id);
        !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<void*> kernargs = device.allocate_host(uint64_t{q->ring_} * kKernargSlotBytes);
  if (!kernargs.ok()) return kernargs.status();
  q->kernargs_ = static_cast<std::byte*>(*kernargs);
  absl::StatusOr<void*> staging = device.allocate_host(kStagingBytes);
  if (!staging.ok()) return staging.status();
  q->staging_ = static_cast<std::byte*>(*staging);
  return q;
}

HsaQueue::~HsaQueue() {
  const HsaApi& api = device_.api();
  if (queue_ != nullptr) {
    (void)finish();
  }
  DriverScope driver;
  if (queue_ != nullptr) api.hsa_queue_destroy(queue_);
  if (done_.handle != 0) api.hsa_signal_destroy(done_);
  if (copied_.handle != 0) api.hsa_signal_destroy(copied_);
  if (kernargs_ != nullptr) api.hsa_amd_memory_pool_free(kernargs_);
  if (staging_ != nullptr) api.hsa_amd_memory_pool_free(staging_);
}

void HsaQueue::on_error(hsa_status_t status, hsa_queue_t* /*queue*/, void* self) {
  int expected = HSA_STATUS_SUCCESS;
  static_cast<HsaQueue*>(self)->error_.compare_exchange_strong(expected, status);
}

absl::Status HsaQueue::failure() const {
  const int error = error_.load(std::memory_order_acquire);
  if (error == HSA_STATUS_SUCCESS) return absl::OkStatus();
  return hsa_status(static_cast<hsa_status_t>(error), "queue",
                    absl::StrFormat("a kernel on device %s failed; this queue takes no more work",
                                    device_.info().id));
}

absl::Status HsaQueue::wait_for(EventId event) const {
  const HsaApi& api = device_.api();
  const hsa_signal_value_t target = kSignalStart - static_cast<hsa_signal_value_t>(event);
  DriverScope driver;
  while (api.hsa_signal_load_scacquire(done_) > target) {
    if (absl::Status s = failure(); !s.ok()) return s;
    api.hsa_signal_wait_scacquire(done_, HSA_SIGNAL_CONDITION_LT, target + 1, device_.wait_ticks(),
                                  HSA_WAIT_STATE_BLOCKED);
  }
  return absl::OkStatus();
}

absl::StatusOr<EventId> HsaQueue::enqueue_kernel(CompiledKernel& compiled,
                                                 const LaunchGeometry& geometry,
                                                 const LaunchContext& context,
                                                 std::span<const KernelArg> args) {
  auto& kernel = static_cast<HsaKernel&>(compiled);
  // An AQL packet holds the grid in 32-bit work-item counts per dimension.
  const uint32_t grid_max[3] = {device_.grid_max().x, device_.grid_max().y, device_.grid_max().z};
  uint32_t grid[3];
  for (int d = 0; d < 3; ++d) {
    const uint64_t items = geometry.groups[d] * geometry.items[d];
    if (geometry.items[d] > UINT16_MAX || items > grid_max[d]) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "kernel `%s`: %d groups of %d items in dimension %d exceed device %s's grid of %d "
          "work-items",
          kernel.name(), geometry.groups[d], geometry.items[d], d + 1, device_.info().id,
          grid_max[d]));
    }
    grid[d] = static_cast<uint32_t>(items);
  }

  absl::MutexLock lock(&mu_);
  if (absl::Status s = failure(); !s.ok()) return s;
  const EventId event = next_;
  // The packet and kernarg slot this dispatch takes were last used by
  // dispatch event - ring_: it must have completed.
  if (event > ring_) {
    if (absl::Status s = wait_for(event - ring_); !s.ok()) return s;
  }
  std::byte* kernarg = kernargs_ + (event % ring_) * kKernargSlotBytes;
  absl::StatusOr<uint32_t> group_bytes =
      pack_kernargs(kernel.layout(), context, args, geometry, &HsaBuffer::address,
                    std::span<std::byte>(kernarg, kKernargSlotBytes));
  if (!group_bytes.ok()) return group_bytes.status();
  if (*group_bytes > device_.info().limits.local_memory_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s`: %d bytes of group memory (static and local arguments), device %s has %d",
        kernel.name(), *group_bytes, device_.info().id, device_.info().limits.local_memory_bytes));
  }

  const HsaApi& api = device_.api();
  DriverScope driver;
  const uint64_t index = api.hsa_queue_add_write_index_relaxed(queue_, 1);
  auto* packet =
      static_cast<hsa_kernel_dispatch_packet_t*>(queue_->base_address) + index % queue_->size;
  // Everything but the header first: the packet processor reads a packet
  // once its header says it is a dispatch.
  packet->workgroup_size_x = static_cast<uint16_t>(geometry.items[0]);
  packet->workgroup_size_y = static_cast<uint16_t>(geometry.items[1]);
  packet->workgroup_size_z = static_cast<uint16_t>(geometry.items[2]);
  packet->reserved0 = 0;
  packet->grid_size_x = grid[0];
  packet->grid_size_y = grid[1];
  packet->grid_size_z = grid[2];
  packet->private_segment_size = kernel.private_segment_size();
  packet->group_segment_size = *group_bytes;
  packet->kernel_object = kernel.kernel_object();
  packet->kernarg_address = kernarg;
  packet->reserved2 = 0;
  packet->completion_signal = done_;
  __atomic_store_n(reinterpret_cast<uint32_t*>(packet),
                   uint32_t{kDispatchHeader} | (uint32_t{kDispatchSetup} << 16), __ATOMIC_RELEASE);
  api.hsa_signal_store_screlease(queue_->doorbell_signal, static_cast<hsa_signal_value_t>(index));
  return next_++;
}

absl::Status HsaQueue::copy(void* dst, hsa_agent_t dst_agent, const void* src,
                            hsa_agent_t src_agent, size_t bytes) {
  const HsaApi& api = device_.api();
  DriverScope driver;
  api.hsa_signal_store_relaxed(copied_, 1);
  if (absl::Status s = hsa_status(
          api.hsa_amd_memory_async_copy(dst, dst_agent, src, src_agent, bytes, 0, nullptr, copied_),
          "hsa_amd_memory_async_copy", device_.info().id);
      !s.ok()) {
    return s;
  }
  // Done at 0; the runtime reports a failed copy by a negative value.
  hsa_signal_value_t value = 1;
  while (value >= 1) {
    value = api.hsa_signal_wait_scacquire(copied_, HSA_SIGNAL_CONDITION_LT, 1, device_.wait_ticks(),
                                          HSA_WAIT_STATE_BLOCKED);
  }
  if (value < 0) {
    return absl::InternalError(absl::StrFormat("hsa_amd_memory_async_copy of %d bytes on %s failed",
                                               bytes, device_.info().id));
  }
  return absl::OkStatus();
}

absl::Status HsaQueue::write_buffer(Buffer& buffer, uint64_t offset,
                                    std::span<const std::byte> data) {
  if (absl::Status s = check_transfer(*this, buffer, offset, data.size()); !s.ok()) return s;
  if (data.empty()) return absl::OkStatus();
  auto* device_bytes = static_cast<std::byte*>(static_cast<HsaBuffer&>(buffer).pointer());
  absl::MutexLock lock(&mu_);
  if (absl::Status s = failure(); !s.ok()) return s;
  if (absl::Status s = wait_for(next_ - 1); !s.ok()) return s;  // after earlier commands
  for (uint64_t done = 0; done < data.size();) {
    const size_t n = std::min<uint64_t>(kStagingBytes, data.size() - done);
    std::memcpy(staging_, data.data() + done, n);
    if (absl::Status s =
            copy(device_bytes + offset + done, device_.agent(), staging_, device_.host_agent(), n);
        !s.ok()) {
      return s;
    }
    done += n;
  }
  return absl::OkStatus();
}

absl::Status HsaQueue::read_buffer(const Buffer& buffer, uint64_t offset,
                                   std::span<std::byte> data) {
  if (absl::Status s = check_transfer(*this, buffer, offset, data.size()); !s.ok()) return s;
  if (data.empty()) return absl::OkStatus();
  const auto* device_bytes =
      static_cast<const std::byte*>(static_cast<const HsaBuffer&>(buffer).pointer());
  absl::MutexLock lock(&mu_);
  if (absl::Status s = failure(); !s.ok()) return s;
  if (absl::Status s = wait_for(next_ - 1); !s.ok()) return s;
  for (uint64_t done = 0; done < data.size();) {
    const size_t n = std::min<uint64_t>(kStagingBytes, data.size() - done);
    if (absl::Status s =
            copy(staging_, device_.host_agent(), device_bytes + offset + done, device_.agent(), n);
        !s.ok()) {
      return s;
    }
    std::memcpy(data.data() + done, staging_, n);
    done += n;
  }
  return absl::OkStatus();
}

absl::Status HsaQueue::wait(EventId event) {
  if (event == 0) return absl::OkStatus();
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = check_issued(event, next_); !s.ok()) return s;
  }
  return wait_for(event);
}

bool HsaQueue::ended(EventId event) {
  if (event == 0) return true;
  {
    absl::MutexLock lock(&mu_);
    if (event >= next_) return false;
  }
  if (!failure().ok()) return false;  // for wait() to report
  DriverScope driver;
  return device_.api().hsa_signal_load_scacquire(done_) <=
         kSignalStart - static_cast<hsa_signal_value_t>(event);
}

absl::Status HsaQueue::finish() {
  EventId last;
  {
    absl::MutexLock lock(&mu_);
    last = next_ - 1;
  }
  if (last == 0) return failure();
  return wait_for(last);
}

}  // namespace kad::hsa
