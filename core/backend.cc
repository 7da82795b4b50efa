#include "core/backend.h"

#include "absl/strings/str_format.h"

namespace kad {

absl::Status check_buffer_range(const Buffer& buffer, uint64_t offset, uint64_t size) {
  uint64_t end;
  if (__builtin_add_overflow(offset, size, &end) || end > buffer.size()) {
    return absl::OutOfRangeError(
        absl::StrFormat("range of %d bytes at offset %d does not fit in a buffer of %d bytes", size,
                        offset, buffer.size()));
  }
  return absl::OkStatus();
}

absl::Status check_issued(EventId id, EventId next) {
  if (id < next) return absl::OkStatus();
  return absl::NotFoundError(
      absl::StrFormat("event %d was never issued on this queue (the last is %d)", id, next - 1));
}

absl::Status check_allocation(const DeviceInfo& device, uint64_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("cannot allocate a buffer of 0 bytes");
  if (bytes > device.limits.max_allocation_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("a buffer of %d bytes exceeds device %s's largest allocation of %d bytes",
                        bytes, device.id, device.limits.max_allocation_bytes));
  }
  return absl::OkStatus();
}

absl::Status check_transfer(const Queue& queue, const Buffer& buffer, uint64_t offset,
                            uint64_t size) {
  if (&buffer.device() != &queue.device()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a buffer on device %s cannot be copied by a queue on device %s",
                        buffer.device().info().id, queue.device().info().id));
  }
  return check_buffer_range(buffer, offset, size);
}

}  // namespace kad
