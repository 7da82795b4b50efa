// Memory the daemon shares with a client as a file descriptor (zero-copy
// buffers, shared-memory channels). The client is untrusted (DESIGN §8): a
// memfd it could shrink would make the daemon's next access to the mapping
// die of SIGBUS. So every such memfd is sized once and then sealed against
// shrinking, growing and further sealing; a client can only hurt itself.
#pragma once

#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"

namespace kad::server {

// A new memfd of `bytes` zero bytes, sealed (F_SEAL_SHRINK | F_SEAL_GROW |
// F_SEAL_SEAL), close-on-exec. The caller owns the fd. `name` shows in
// /proc/<pid>/fd and in errors.
absl::StatusOr<int> create_sealed_memfd(const char* name, uint64_t bytes);

// Frees the memory behind `bytes` of memfd `fd` now, in every mapping of it
// (a hole punched, the size kept, so no mapping faults). For memory kad lets
// go of: a client or worker that keeps a mapping of it afterwards reads
// zeros, and its pages, which the kernel charges to kad, go with kad's own
// count of them (--max-host-memory) rather than stay as long as the mapping.
void release_memfd_memory(int fd, uint64_t bytes);

// A memfd mapped shared and read-write, owning the mapping and the fd: the
// memory kad shares with a worker (launch rings, queue progress pages, lent
// channels). Unmapped and closed when it goes; the memory itself is freed
// then (release_memfd_memory) only where this mapping made it.
class SharedMapping {
 public:
  // A new sealed memfd of `bytes` zero bytes (create_sealed_memfd), mapped;
  // its memory is freed with this mapping.
  static absl::StatusOr<SharedMapping> create(const char* name, uint64_t bytes);
  // Maps `bytes` of `fd`, which it owns from now on (closed if the map
  // fails); `what` names it in the error. The memory is its maker's: it
  // stays as it is, for the other mappings, when this one goes. (A worker's
  // second loan of a channel replaced its first mapping, which punched a
  // hole in the client's rings and ended the channel.)
  static absl::StatusOr<SharedMapping> map(int fd, uint64_t bytes, const char* what);
  SharedMapping(SharedMapping&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)),
        data_(std::exchange(other.data_, nullptr)),
        bytes_(other.bytes_),
        made_(other.made_) {}
  SharedMapping& operator=(SharedMapping&&) = delete;
  SharedMapping(const SharedMapping&) = delete;
  ~SharedMapping();

  int fd() const { return fd_; }
  void* data() const { return data_; }

 private:
  SharedMapping(int fd, void* data, uint64_t bytes) : fd_(fd), data_(data), bytes_(bytes) {}
  int fd_;
  void* data_;
  uint64_t bytes_;
  bool made_ = false;  // by create(): the memory goes with it
};

}  // namespace kad::server
