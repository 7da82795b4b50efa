// What a backend's compile returns, as far as the kernel cache and a
// Kernel's table are concerned: an object someone owns. For the core tests
// that exercise ownership and eviction without a driver.
#pragma once

#include <optional>
#include <vector>

#include "core/backend.h"

namespace kad::testing {

class CompiledStandIn final : public CompiledKernel {
 public:
  // `host_bytes`: what it holds in the daemon's memory, as a worker's
  // kernel holds its program binary.
  // `parameters`: as its driver reported them (none: it cannot tell).
  explicit CompiledStandIn(uint64_t host_bytes = 0,
                           std::optional<std::vector<KernelParameter>> parameters = std::nullopt)
      : host_bytes_(host_bytes), parameters_(std::move(parameters)) {}
  const KernelLimits& limits() const override { return limits_; }
  uint64_t launch_configuration(uint64_t, uint64_t) const override { return 1; }
  uint64_t host_bytes() const override { return host_bytes_; }
  const std::vector<KernelParameter>* parameters() const override {
    return parameters_ ? &*parameters_ : nullptr;
  }

 private:
  KernelLimits limits_;
  uint64_t host_bytes_;
  std::optional<std::vector<KernelParameter>> parameters_;
};

}  // namespace kad::testing
