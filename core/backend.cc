#include "core/backend.h"

#include "absl/strings/str_format.h"

namespace kad {

absl::Status check_buffer_range(const Buffer& buffer, uint64_t offset, uint64_t size) {
  uint64_t end;
  if (__builtin_add_overflow(offset, size, &end) || end > buffer.size()) {
    return absl::OutOfRangeError(absl::StrFormat(
        "range of %d bytes at offset %d does not fit in a buffer of %d bytes", size, offset,
        buffer.size()));
  }
  return absl::OkStatus();
}

}  // namespace kad
