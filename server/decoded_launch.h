// A launch decoded from either transport's bytes (a gRPC Launch, a
// shared-memory SubmitRecord), with the storage its request points into:
// fixed-size, so decoding allocates nothing. Knows no engine: whoever serves
// a channel's records decodes them into this.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "core/kernel.h"
#include "core/launch_request.h"

namespace kad::server {

// A launch as the wire gives it, in handles.
struct LaunchByHandle {
  uint64_t queue = 0;
  uint64_t kernel = 0;
  const NdRange* ndrange = nullptr;
  const Dims* workgroup = nullptr;
  std::span<const KernelArg> args;  // buffers given as handles in KernelArg::bits
};

struct DecodedLaunch {
  NdRange ndrange;
  Dims workgroup;
  std::array<KernelArg, kMaxKernelArgs> args;
  LaunchByHandle request;  // points into the fields above
};

}  // namespace kad::server
