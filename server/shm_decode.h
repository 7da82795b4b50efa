// Decodes one shared-memory submission record — untrusted bytes a client
// wrote — into a launch or copy the engine understands. Every field is
// checked; nothing is allocated unless an error message is built. The record
// must already be a private copy (the client may still be writing the slot).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "core/kernel.h"
#include "kad/shm/v1/layout.h"
#include "server/decoded_launch.h"

namespace kad::server {

absl::Status decode_launch(const shm::v1::SubmitRecord& record, uint64_t queue, DecodedLaunch* out);

// A copy's arena range must lie inside the arena.
absl::Status check_arena_range(const shm::v1::SubmitRecord& record, uint64_t arena_bytes);

}  // namespace kad::server
