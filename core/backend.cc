#include "core/backend.h"

#include <cstring>
#include <memory>

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

absl::Status Queue::run_kernel(CompiledKernel& kernel, const LaunchGeometry& geometry,
                               const LaunchContext& context, std::span<const KernelArg> args) {
  absl::StatusOr<EventId> event = enqueue_kernel(kernel, geometry, context, args);
  return event.ok() ? wait(*event) : event.status();
}

absl::Status Queue::write_buffer_pieces(Buffer& buffer, uint64_t offset,
                                        std::span<const std::span<const std::byte>> pieces) {
  if (pieces.size() == 1) return write_buffer(buffer, offset, pieces.front());
  const uint64_t size = size_of_pieces(pieces);
  const auto whole = std::make_unique_for_overwrite<std::byte[]>(size);
  copy_pieces(whole.get(), pieces);
  return write_buffer(buffer, offset, {whole.get(), size});
}

uint64_t size_of_pieces(std::span<const std::span<const std::byte>> pieces) {
  uint64_t size = 0;
  for (const std::span<const std::byte> piece : pieces) size += piece.size();
  return size;
}

void copy_pieces(std::byte* to, std::span<const std::span<const std::byte>> pieces) {
  for (const std::span<const std::byte> piece : pieces) {
    if (!piece.empty()) std::memcpy(to, piece.data(), piece.size());
    to += piece.size();
  }
}

}  // namespace kad
