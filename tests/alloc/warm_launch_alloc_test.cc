// DESIGN §7: a warm launch performs no heap allocation in kad's own code.
// Real launches on PoCL through core's launch(), counted by the replaced
// allocator of support/alloc_counter.cc; allocations inside driver calls are
// the driver's (the benchmarks report them). The daemon's dispatch and the
// client transports: daemon_alloc_test.cc and shm_alloc_test.cc.
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/alloc_counter.h"
#include "tests/support/pocl.h"

namespace kad {
namespace {

using testing::AllocCounter;
using testing::PoclTest;

constexpr char kSaxpy[] = R"(
kernel void saxpy(KAD_CONTEXT, global float* z, float a,
                  const global float* restrict x, const global float* restrict y) {
  if (kad_active()) {
    long i = kad_global_linear();
    z[i] = a * x[i] + y[i];
  }
}
)";

constexpr int kLaunches = 500;

class WarmLaunch : public PoclTest {
 protected:
  void SetUp() override {
    PoclTest::SetUp();
    z_ = make_buffer<float>(kElements, 0.0f);
    x_ = make_buffer<float>(kElements, 1.0f);
    y_ = make_buffer<float>(kElements, 2.0f);
    args_ = {KernelArg::of_buffer(*z_), KernelArg::of_scalar(3.0f), KernelArg::of_buffer(*x_),
             KernelArg::of_buffer(*y_)};
  }

  std::unique_ptr<Kernel> saxpy(std::optional<NdRange> static_ndrange,
                                std::optional<Dims> static_workgroup) {
    return make_kernel(kSaxpy, {"saxpy",
                                static_ndrange,
                                static_workgroup,
                                {ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kF32),
                                 ArgSpec::const_buffer(), ArgSpec::const_buffer()},
                                ""});
  }

  // Warms the kernel up, then counts kad's allocations on this thread over
  // `kLaunches` launches. Synchronous launches wait for each; pipelined ones
  // wait once at the end.
  uint64_t kad_allocs(Kernel& kernel, const NdRange* range, const Dims* wg, bool synchronous) {
    const LaunchRequest request{range, wg, args_};
    for (int i = 0; i < 3; ++i) {
      auto r = launch(kernel, queue(), cache(), request);
      EXPECT_TRUE(r.ok()) << r.status();
      EXPECT_TRUE(queue().wait(r->event).ok());
    }
    EventId last = 0;
    int launched = 0;
    AllocCounter counter;
    for (; launched < kLaunches; ++launched) {
      absl::StatusOr<LaunchResult> r = launch(kernel, queue(), cache(), request);
      if (!r.ok()) break;
      last = r->event;
      if (synchronous && !queue().wait(last).ok()) break;
    }
    EXPECT_TRUE(queue().wait(last).ok());
    const uint64_t allocs = counter.counts().kad_allocs;
    EXPECT_EQ(launched, kLaunches);
    for (float v : download<float>(*z_)) EXPECT_EQ(v, 5.0f);
    return allocs;
  }

  static constexpr size_t kElements = 4096;
  std::unique_ptr<Buffer> z_, x_, y_;
  std::vector<KernelArg> args_;
};

TEST_F(WarmLaunch, TunedWorkgroupAllocatesNothingInKad) {
  auto kernel = saxpy(std::nullopt, std::nullopt);
  const NdRange range(Dims{kElements});
  EXPECT_EQ(kad_allocs(*kernel, &range, nullptr, true), 0u);
  EXPECT_EQ(kad_allocs(*kernel, &range, nullptr, false), 0u);
}

TEST_F(WarmLaunch, StaticSizesAllocateNothingInKad) {
  const NdRange range(Dims{kElements});
  auto kernel = saxpy(range, Dims{256});
  EXPECT_EQ(kad_allocs(*kernel, nullptr, nullptr, true), 0u);
  EXPECT_EQ(kad_allocs(*kernel, nullptr, nullptr, false), 0u);
}

TEST_F(WarmLaunch, LinearLaunchOfRankFourAllocatesNothingInKad) {
  auto kernel = saxpy(std::nullopt, std::nullopt);
  const NdRange range(Dims{8, 8, 8, 8});
  const Dims wg{8, 8};
  EXPECT_EQ(kad_allocs(*kernel, &range, &wg, true), 0u);
}

TEST_F(WarmLaunch, TheCounterSeesKadAllocations) {
  // The counter is not blind: building an error message allocates.
  auto kernel = saxpy(std::nullopt, std::nullopt);
  AllocCounter counter;
  auto r = launch(*kernel, queue(), cache(), {nullptr, nullptr, args_});
  EXPECT_FALSE(r.ok());
  EXPECT_GT(counter.counts().kad_allocs, 0u);
}

}  // namespace
}  // namespace kad
