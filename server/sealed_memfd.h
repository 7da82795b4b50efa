// Memory the daemon shares with a client as a file descriptor (zero-copy
// buffers, shared-memory channels). The client is untrusted (DESIGN §8): a
// memfd it could shrink would make the daemon's next access to the mapping
// die of SIGBUS. So every such memfd is sized once and then sealed against
// shrinking, growing and further sealing; a client can only hurt itself.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

namespace kad::server {

// A new memfd of `bytes` zero bytes, sealed (F_SEAL_SHRINK | F_SEAL_GROW |
// F_SEAL_SEAL), close-on-exec. The caller owns the fd. `name` shows in
// /proc/<pid>/fd and in errors.
absl::StatusOr<int> create_sealed_memfd(const char* name, uint64_t bytes);

}  // namespace kad::server
