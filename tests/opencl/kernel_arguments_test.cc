// A cl_kernel keeps its arguments between enqueues, and the OpenCL queue
// sets only those that changed since the launch before on the same kernel
// (OpenClKernel::Lease::set_arg). Each launch here changes one thing and
// checks that the kernel saw it: a scalar, a buffer, the launch's extent
// (the context argument), a local argument's size, and a buffer freed and
// allocated again, whose handle the driver may give out twice.
#include <vector>

#include "core/launch.h"
#include "gtest/gtest.h"
#include "tests/support/pocl.h"

namespace kad {
namespace {

// out[i] = in[i] * scale + the local scratch's size in ints (read back from
// what the group wrote to it) for the items within the extent.
constexpr char kScale[] = R"(
kernel void scale(KAD_CONTEXT, global int* out, global const int* in, int scale,
                  local int* scratch, int scratch_ints) {
  if (!kad_active()) return;
  const size_t i = kad_global_linear();
  const size_t l = get_local_id(0);
  if (l == 0) scratch[scratch_ints - 1] = scratch_ints;
  barrier(CLK_LOCAL_MEM_FENCE);
  out[i] = in[i] * scale + scratch[scratch_ints - 1];
}
)";

class KernelArguments : public testing::PoclTest {
 protected:
  void SetUp() override {
    testing::PoclTest::SetUp();
    kernel_ = make_kernel(
        kScale, {"scale",
                 std::nullopt,
                 Dims{8},
                 {ArgSpec::buffer(), ArgSpec::const_buffer(), ArgSpec::scalar_of(ScalarType::kI32),
                  ArgSpec::local(), ArgSpec::scalar_of(ScalarType::kI32)},
                 ""});
    ASSERT_NE(kernel_, nullptr);
    std::vector<int32_t> in(kItems);
    for (int32_t i = 0; i < kItems; ++i) in[i] = i;
    in_ = upload(std::span<const int32_t>(in));
  }

  // Launches over `items` with `out`, `scale` and `scratch_ints`, waits,
  // and checks every item of `out` within the extent (those past it keep
  // `untouched`).
  void launch_and_check(Buffer& out, int32_t scale, int32_t scratch_ints, int64_t items,
                        int32_t untouched) {
    const NdRange range(Dims{items});
    KernelArg args[] = {KernelArg::of_buffer(out), KernelArg::of_buffer(*in_),
                        KernelArg::of_scalar(scale),
                        KernelArg::of_local(uint64_t(scratch_ints) * sizeof(int32_t)),
                        KernelArg::of_scalar(scratch_ints)};
    absl::StatusOr<LaunchResult> r = launch(*kernel_, queue(), cache(), {&range, nullptr, args});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(queue().wait(r->event).ok());
    const std::vector<int32_t> got = download<int32_t>(out);
    for (int32_t i = 0; i < kItems; ++i) {
      const int32_t want = i < items ? i * scale + scratch_ints : untouched;
      ASSERT_EQ(got[i], want) << "item " << i << ", scale " << scale << ", scratch " << scratch_ints
                              << ", extent " << items;
    }
  }

  static constexpr int32_t kItems = 256;
  std::unique_ptr<Kernel> kernel_;
  std::unique_ptr<Buffer> in_;
};

TEST_F(KernelArguments, EachLaunchSeesTheArgumentsItWasGivenWhicheverChanged) {
  auto a = make_buffer<int32_t>(kItems, -1);
  auto b = make_buffer<int32_t>(kItems, -2);
  launch_and_check(*a, 2, 4, kItems, -1);
  launch_and_check(*a, 2, 4, kItems, -1);   // the same launch again
  launch_and_check(*a, 3, 4, kItems, -1);   // a scalar
  launch_and_check(*b, 3, 4, kItems, -2);   // a buffer
  launch_and_check(*b, 3, 16, kItems, -2);  // a local argument's size and a scalar
  // The extent (the context argument): items past it keep their values.
  auto c = make_buffer<int32_t>(kItems, -3);
  launch_and_check(*c, 5, 16, 128, -3);
  launch_and_check(*a, 5, 16, kItems, -1);
}

TEST_F(KernelArguments, ABufferAllocatedWhereAFreedOneWasIsTheOneTheKernelWrites) {
  for (int32_t round = 0; round < 8; ++round) {
    // A fresh buffer each round, the last one freed: the driver may give
    // the new one the old one's handle, or not; the kernel writes the new.
    auto out = make_buffer<int32_t>(kItems, -round);
    launch_and_check(*out, round + 1, 4, kItems, -round);
  }
}

}  // namespace
}  // namespace kad
