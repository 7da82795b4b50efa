// An in-order kad queue on one Level Zero device: one immediate command list
// on the device's compute engines, and a ring of events from one event pool
// indexed by event id, so that recording a command allocates nothing in kad's
// code.
//
// Level Zero does not promise that the commands of a command list run one
// after another, so each command waits for the event of the one before it:
// that chain is what makes the queue in order, and what lets waiting for one
// event also wait for everything submitted before it.
#pragma once

#include <level_zero/ze_api.h>

#include <array>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "backends/level_zero/level_zero_device.h"
#include "core/backend.h"

namespace kad::level_zero {

class LevelZeroQueue final : public Queue {
 public:
  static absl::StatusOr<std::unique_ptr<LevelZeroQueue>> create(LevelZeroDevice& device);
  ~LevelZeroQueue() override;

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

  // Events in the ring: at most kRing - 1 commands are in flight; the next
  // one waits (on the host) for the oldest to complete before reusing its event.
  static constexpr uint32_t kRing = 1024;

 private:
  // The event a command signals and the one it waits for.
  struct Slot {
    EventId id = 0;
    ze_event_handle_t signal = nullptr;
    ze_event_handle_t previous = nullptr;  // null: nothing pending before it
  };
  // Marks a slot whose event the host signalled after a failed append, so
  // that a waiter that picked it up wakes; reset before reuse, never waited for.
  static constexpr EventId kHostSignalled = ~EventId{0};

  explicit LevelZeroQueue(LevelZeroDevice& device) : device_(device) {}

  // Makes the next id's event ready to signal: waits until the command that
  // last used it and the one that waited for it are done, then resets it.
  absl::Status acquire(Slot* slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After the append: the slot belongs to its command, the id is issued.
  void commit(const Slot& slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a failed append: leaves the slot's event signalled (see kHostSignalled).
  void abandon(const Slot& slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for event `id` if its slot still holds it (otherwise it completed).
  absl::Status synchronize(EventId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A copy between host and device memory, ordered after earlier commands;
  // returns when it is done.
  absl::Status copy(void* destination, const void* source, size_t bytes, const char* what);

  LevelZeroDevice& device_;
  ze_command_list_handle_t list_ = nullptr;
  ze_event_pool_handle_t pool_ = nullptr;
  absl::Mutex mu_;
  std::array<ze_event_handle_t, kRing> events_ ABSL_GUARDED_BY(mu_){};
  // The id of the command whose completion each event reports; 0: reset.
  std::array<EventId, kRing> owner_ ABSL_GUARDED_BY(mu_){};
  EventId next_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace kad::level_zero
