#include "backends/level_zero/level_zero_queue.h"

#include <cstdint>

#include "absl/strings/str_format.h"
#include "backends/level_zero/level_zero_buffer.h"
#include "backends/level_zero/level_zero_kernel.h"
#include "backends/level_zero/level_zero_launch.h"
#include "backends/level_zero/level_zero_status.h"
#include "core/driver_scope.h"

namespace kad::level_zero {
namespace {

constexpr uint64_t kForever = UINT64_MAX;

}  // namespace

absl::StatusOr<std::unique_ptr<LevelZeroQueue>> LevelZeroQueue::create(LevelZeroDevice& device) {
  const LevelZeroApi& api = device.api();
  const std::string& id = device.info().id;
  std::unique_ptr<LevelZeroQueue> q(new LevelZeroQueue(device));
  DriverScope driver;

  // Host-visible: kad waits for completion on the host.
  ze_event_pool_desc_t pool_desc{};
  pool_desc.stype = ZE_STRUCTURE_TYPE_EVENT_POOL_DESC;
  pool_desc.flags = ZE_EVENT_POOL_FLAG_HOST_VISIBLE;
  pool_desc.count = kRing;
  ze_device_handle_t handle = device.handle();
  if (absl::Status s =
          ze_status(api.zeEventPoolCreate(device.context(), &pool_desc, 1, &handle, &q->pool_),
                    "zeEventPoolCreate", id);
      !s.ok()) {
    q->pool_ = nullptr;
    return s;
  }
  {
    absl::MutexLock lock(&q->mu_);
    for (uint32_t i = 0; i < kRing; ++i) {
      // Signalled with host scope: results a command wrote are visible to the
      // host (and to later commands) once its event completes.
      ze_event_desc_t event_desc{};
      event_desc.stype = ZE_STRUCTURE_TYPE_EVENT_DESC;
      event_desc.index = i;
      event_desc.signal = ZE_EVENT_SCOPE_FLAG_HOST;
      event_desc.wait = ZE_EVENT_SCOPE_FLAG_HOST;
      ze_result_t r = api.zeEventCreate(q->pool_, &event_desc, &q->events_[i]);
      if (r != ZE_RESULT_SUCCESS) {
        q->events_[i] = nullptr;
        return ze_status(r, "zeEventCreate", absl::StrFormat("%s, event %d", id, i));
      }
    }
  }

  ze_command_queue_desc_t queue_desc{};
  queue_desc.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC;
  queue_desc.ordinal = device.compute_ordinal();
  queue_desc.index = 0;
  queue_desc.mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS;
  queue_desc.priority = ZE_COMMAND_QUEUE_PRIORITY_NORMAL;
  if (absl::Status s = ze_status(api.zeCommandListCreateImmediate(device.context(), device.handle(),
                                                                  &queue_desc, &q->list_),
                                 "zeCommandListCreateImmediate", id);
      !s.ok()) {
    q->list_ = nullptr;
    return s;
  }
  return q;
}

LevelZeroQueue::~LevelZeroQueue() {
  const LevelZeroApi& api = device_.api();
  if (list_) {
    finish().IgnoreError();
    api.zeCommandListDestroy(list_);
  }
  absl::MutexLock lock(&mu_);
  for (ze_event_handle_t e : events_) {
    if (e) api.zeEventDestroy(e);
  }
  if (pool_) api.zeEventPoolDestroy(pool_);
}

absl::Status LevelZeroQueue::synchronize(EventId id) {
  if (id == 0) return absl::OkStatus();
  const uint32_t s = id % kRing;
  if (owner_[s] != id) return absl::OkStatus();  // recycled: it completed first
  ze_result_t r = device_.api().zeEventHostSynchronize(events_[s], kForever);
  if (r != ZE_RESULT_SUCCESS) {
    return ze_status(r, "zeEventHostSynchronize", absl::StrFormat("event %d", id));
  }
  return absl::OkStatus();
}

absl::Status LevelZeroQueue::acquire(Slot* slot) {
  const EventId id = next_;
  const uint32_t s = id % kRing;
  if (owner_[s] != 0) {
    if (owner_[s] != kHostSignalled) {
      // The command after the old owner waited for this event: it must have
      // seen it signalled before the event is reset.
      const EventId old = owner_[s];
      if (absl::Status st = synchronize(old + 1); !st.ok()) return st;
      if (absl::Status st = synchronize(old); !st.ok()) return st;
    }
    ze_result_t r = device_.api().zeEventHostReset(events_[s]);
    if (r != ZE_RESULT_SUCCESS) {
      return ze_status(r, "zeEventHostReset", absl::StrFormat("event slot %d", s));
    }
    owner_[s] = 0;
  }
  slot->id = id;
  slot->signal = events_[s];
  const EventId previous = id - 1;
  const uint32_t p = previous % kRing;
  slot->previous = previous != 0 && owner_[p] == previous ? events_[p] : nullptr;
  return absl::OkStatus();
}

void LevelZeroQueue::commit(const Slot& slot) {
  owner_[slot.id % kRing] = slot.id;
  next_ = slot.id + 1;
}

void LevelZeroQueue::abandon(const Slot& slot) {
  device_.api().zeEventHostSignal(slot.signal);
  owner_[slot.id % kRing] = kHostSignalled;
}

absl::StatusOr<EventId> LevelZeroQueue::enqueue_kernel(CompiledKernel& compiled,
                                                       const LaunchGeometry& geometry,
                                                       const LaunchContext& context,
                                                       std::span<const KernelArg> args) {
  // Core validated the arguments against this device: buffers are ours.
  auto& kernel = static_cast<LevelZeroKernel&>(compiled);
  const LevelZeroApi& api = device_.api();
  LaunchGrid grid;
  if (absl::Status s = launch_grid(kernel.name(), geometry, &grid); !s.ok()) return s;

  absl::MutexLock kernel_lock(&kernel.launch_mutex());
  absl::MutexLock lock(&mu_);
  DriverScope driver;
  ze_kernel_handle_t k = kernel.handle();
  const ArgumentValue context_value = context_argument(context);
  ze_result_t r = api.zeKernelSetArgumentValue(k, 0, context_value.size, context_value.value);
  uint32_t index = 0;
  while (r == ZE_RESULT_SUCCESS && index < args.size()) {
    const KernelArg& a = args[index];
    void* const* address = a.kind == ArgKind::kBuffer || a.kind == ArgKind::kConstBuffer
                               ? static_cast<const LevelZeroBuffer*>(a.buffer)->address_slot()
                               : nullptr;
    const ArgumentValue value = user_argument(a, address);
    ++index;
    r = api.zeKernelSetArgumentValue(k, index, value.size, value.value);
  }
  if (r != ZE_RESULT_SUCCESS) {
    return ze_status(r, "zeKernelSetArgumentValue",
                     absl::StrFormat("kernel `%s`, parameter %d", kernel.name(), index));
  }
  r = api.zeKernelSetGroupSize(k, grid.group_size[0], grid.group_size[1], grid.group_size[2]);
  if (r != ZE_RESULT_SUCCESS) {
    return ze_status(r, "zeKernelSetGroupSize",
                     absl::StrFormat("kernel `%s`, group size (%d, %d, %d)", kernel.name(),
                                     grid.group_size[0], grid.group_size[1], grid.group_size[2]));
  }
  Slot slot;
  if (absl::Status s = acquire(&slot); !s.ok()) return s;
  r = api.zeCommandListAppendLaunchKernel(list_, k, &grid.groups, slot.signal,
                                          slot.previous ? 1 : 0,
                                          slot.previous ? &slot.previous : nullptr);
  if (r != ZE_RESULT_SUCCESS) {
    abandon(slot);
    return ze_status(
        r, "zeCommandListAppendLaunchKernel",
        absl::StrFormat("kernel `%s`, group size (%d, %d, %d), groups (%d, %d, %d)", kernel.name(),
                        grid.group_size[0], grid.group_size[1], grid.group_size[2],
                        grid.groups.groupCountX, grid.groups.groupCountY, grid.groups.groupCountZ));
  }
  commit(slot);
  return slot.id;
}

absl::Status LevelZeroQueue::copy(void* destination, const void* source, size_t bytes,
                                  const char* what) {
  EventId id = 0;
  {
    absl::MutexLock lock(&mu_);
    DriverScope driver;
    Slot slot;
    if (absl::Status s = acquire(&slot); !s.ok()) return s;
    // Host memory here is the caller's own (pageable); the driver stages it.
    ze_result_t r = device_.api().zeCommandListAppendMemoryCopy(
        list_, destination, source, bytes, slot.signal, slot.previous ? 1 : 0,
        slot.previous ? &slot.previous : nullptr);
    if (r != ZE_RESULT_SUCCESS) {
      abandon(slot);
      return ze_status(r, "zeCommandListAppendMemoryCopy",
                       absl::StrFormat("%s of %d bytes on %s", what, bytes, device_.info().id));
    }
    commit(slot);
    id = slot.id;
  }
  return wait(id);
}

absl::Status LevelZeroQueue::write_buffer(Buffer& buffer, uint64_t offset,
                                          std::span<const std::byte> data) {
  if (absl::Status s = check_transfer(*this, buffer, offset, data.size()); !s.ok()) return s;
  if (data.empty()) return absl::OkStatus();
  auto* base = static_cast<std::byte*>(static_cast<LevelZeroBuffer&>(buffer).address());
  return copy(base + offset, data.data(), data.size(), "write to device");
}

absl::Status LevelZeroQueue::read_buffer(const Buffer& buffer, uint64_t offset,
                                         std::span<std::byte> data) {
  if (absl::Status s = check_transfer(*this, buffer, offset, data.size()); !s.ok()) return s;
  if (data.empty()) return absl::OkStatus();
  const auto* base =
      static_cast<const std::byte*>(static_cast<const LevelZeroBuffer&>(buffer).address());
  return copy(data.data(), base + offset, data.size(), "read from device");
}

absl::Status LevelZeroQueue::wait(EventId id) {
  if (id == 0) return absl::OkStatus();
  ze_event_handle_t event = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = check_issued(id, next_); !s.ok()) return s;
    const uint32_t s = id % kRing;
    // A recycled slot's command completed before its event was reset.
    if (owner_[s] != id) return absl::OkStatus();
    event = events_[s];
  }
  // Outside the lock, so that others submit meanwhile. Should the slot be
  // recycled now, this waits for its newer command, which completes later.
  DriverScope driver;
  ze_result_t r = device_.api().zeEventHostSynchronize(event, kForever);
  if (r != ZE_RESULT_SUCCESS) {
    return ze_status(r, "zeEventHostSynchronize",
                     absl::StrFormat("event %d on %s", id, device_.info().id));
  }
  return absl::OkStatus();
}

bool LevelZeroQueue::ended(EventId id) {
  if (id == 0) return true;
  ze_event_handle_t event = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (id >= next_) return false;
    const uint32_t s = id % kRing;
    if (owner_[s] != id) return true;  // recycled: its command completed first
    event = events_[s];
  }
  // A timeout of zero only looks: ZE_RESULT_NOT_READY while it runs.
  DriverScope driver;
  return device_.api().zeEventHostSynchronize(event, 0) == ZE_RESULT_SUCCESS;
}

absl::Status LevelZeroQueue::finish() {
  EventId last = 0;
  {
    absl::MutexLock lock(&mu_);
    last = next_ - 1;
  }
  return wait(last);
}

}  // namespace kad::level_zero
