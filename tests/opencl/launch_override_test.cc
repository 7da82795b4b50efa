// The escape hatch of DESIGN §3: a device whose backend overrides the launch
// receives the whole launch; the generic pipeline does not run for it. The
// overriding device here wraps the real PoCL device (forwarding everything)
// and counts the launches it takes over.
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/pocl.h"

namespace kad {
namespace {

class OverridingDevice;

class ForwardingQueue final : public Queue {
 public:
  ForwardingQueue(Device& device, std::unique_ptr<Queue> inner)
      : device_(device), inner_(std::move(inner)) {}
  Device& device() const override { return device_; }
  Queue& inner() { return *inner_; }
  absl::StatusOr<EventId> enqueue_kernel(CompiledKernel& k, const LaunchGeometry& g,
                                         const LaunchContext& c,
                                         std::span<const KernelArg> a) override {
    return inner_->enqueue_kernel(k, g, c, a);
  }
  absl::Status write_buffer(Buffer& b, uint64_t o, std::span<const std::byte> d) override {
    return inner_->write_buffer(b, o, d);
  }
  absl::Status read_buffer(const Buffer& b, uint64_t o, std::span<std::byte> d) override {
    return inner_->read_buffer(b, o, d);
  }
  absl::Status wait(EventId e) override { return inner_->wait(e); }
  absl::Status finish() override { return inner_->finish(); }

 private:
  Device& device_;
  std::unique_ptr<Queue> inner_;
};

class OverridingDevice final : public Device, public LaunchOverride {
 public:
  explicit OverridingDevice(Device& real) : real_(real) {}
  const DeviceInfo& info() const override { return real_.info(); }
  absl::StatusOr<std::unique_ptr<Buffer>> allocate(uint64_t bytes) override {
    return real_.allocate(bytes);
  }
  absl::StatusOr<std::unique_ptr<Queue>> create_queue() override {
    auto q = real_.create_queue();
    if (!q.ok()) return q.status();
    return std::unique_ptr<Queue>(new ForwardingQueue(*this, *std::move(q)));
  }
  absl::StatusOr<std::unique_ptr<CompiledKernel>> compile(const CompileRequest& r) override {
    return real_.compile(r);
  }
  LaunchOverride* launch_override() override { return this; }

  // Takes the launch over: here, by running the generic pipeline on the real device.
  absl::StatusOr<LaunchResult> launch(Kernel& kernel, Queue& queue,
                                      const LaunchRequest& request) override {
    ++launches;
    return kad::launch(kernel, static_cast<ForwardingQueue&>(queue).inner(), cache, request);
  }

  int launches = 0;
  KernelCache cache;

 private:
  Device& real_;
};

class LaunchOverrideTest : public testing::PoclTest {};

TEST_F(LaunchOverrideTest, ADeviceThatOverridesTheLaunchReceivesIt) {
  OverridingDevice device(testing::pocl_device());
  auto queue = device.create_queue();
  ASSERT_TRUE(queue.ok());
  auto kernel = make_kernel(R"(
kernel void twice(KAD_CONTEXT, global int* x) {
  if (kad_active()) x[kad_global_linear()] *= 2;
})",
                            {"twice", std::nullopt, std::nullopt, {ArgSpec::buffer()}, ""});
  auto x = make_buffer<int32_t>(10, 21);
  const KernelArg args[] = {KernelArg::of_buffer(*x)};
  const NdRange range(Dims{10});
  auto r = kad::launch(*kernel, **queue, cache(), {&range, nullptr, args});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE((*queue)->wait(r->event).ok());
  EXPECT_EQ(device.launches, 1);
  EXPECT_EQ(cache().stats().compilations, 0u) << "the generic pipeline must not have run";
  EXPECT_EQ(device.cache.stats().compilations, 1u);
  EXPECT_EQ(download<int32_t>(*x), std::vector<int32_t>(10, 42));
}

}  // namespace
}  // namespace kad
