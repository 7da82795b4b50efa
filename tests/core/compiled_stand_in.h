// What a backend's compile returns, as far as the kernel cache and a
// Kernel's table are concerned: an object someone owns. For the core tests
// that exercise ownership and eviction without a driver.
#pragma once

#include "core/backend.h"

namespace kad::testing {

class CompiledStandIn final : public CompiledKernel {
 public:
  const KernelLimits& limits() const override { return limits_; }
  uint64_t launch_configuration(uint64_t, uint64_t) const override { return 1; }

 private:
  KernelLimits limits_;
};

}  // namespace kad::testing
