// One benchmark mode's way to launch (DESIGN §9: kad side by side with the
// raw driver): kad's runners live in kad_bench.cc, the raw drivers' in
// raw_opencl_runner.cc and raw_cuda_runner.cc.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/bench_work.h"
#include "core/backend.h"

namespace kad_bench {

class Runner {
 public:
  virtual ~Runner() = default;
  virtual absl::Status setup(const Work& w) = 0;
  virtual absl::Status launch() = 0;  // enqueue one launch
  virtual absl::Status wait() = 0;    // until everything is done
  // A synchronous launch: launch and wait for it. Transports that can answer
  // both in one round trip (Queue::run) do.
  virtual absl::Status run() {
    if (absl::Status s = launch(); !s.ok()) return s;
    return wait();
  }
  virtual absl::Status ping() { return absl::UnimplementedError("no transport"); }
};

// raw/ through the OpenCL ICD loader on the device `device` names (its
// platform and index), or on the first OpenCL device there is when null.
std::unique_ptr<Runner> make_opencl_raw_runner(const kad::DeviceInfo* device);

// raw/ through the CUDA Driver API on CUDA device `ordinal`.
std::unique_ptr<Runner> make_cuda_raw_runner(int ordinal);

// The PTX architecture raw kernels are lowered for: what the CUDA backend
// picks for every device from compute capability 8.0 on (LLVM 15's newest
// target, see ptx_target_for), and what the lead's KAD_PRELOWER=ptx:sm_80
// prepares for kad's own kernels. The driver JIT-compiles it for newer GPUs.
inline constexpr char kRawPtxTarget[] = "sm_80";

// A raw kernel (Work::source(true)) lowered to PTX through kad's toolchain and
// on-disk cache: on a GPU machine without the toolchain the cache must hold it
// (kad_bench --prepare_gpu_cache).
absl::StatusOr<std::string> raw_ptx(const Work& w);

}  // namespace kad_bench
