// Queue::run_kernel (core/backend.h) on PoCL: the launch a worker runs on its
// own thread, enqueued and waited for with no event kept. The launches come
// from the generic pipeline (kad::launch), through a queue that runs each
// one that way on the real OpenCL queue instead of enqueueing it.
#include <vector>

#include "core/launch.h"
#include "gtest/gtest.h"
#include "tests/support/pocl.h"

namespace kad {
namespace {

// `loops` steps per item that change nothing but its time: at 20000, a
// launch of 4096 items takes tens of milliseconds.
constexpr char kFill[] = R"(
kernel void fill(KAD_CONTEXT, global int* out, int value, int loops) {
  if (!kad_active()) return;
  float f = 0.0f;
  for (int i = 0; i < loops; ++i) f = f * 0.999f + 1.0f;
  out[kad_global_linear()] = value + (int)kad_global_linear() + (f < 0.0f ? 1 : 0);
}
)";

// Runs each launch with run_kernel on `inner`: ended when enqueue_kernel
// returns (event 0: nothing to wait for); the last run's status is kept.
class RunningQueue final : public Queue {
 public:
  explicit RunningQueue(Queue& inner) : inner_(inner) {}
  Device& device() const override { return inner_.device(); }
  absl::StatusOr<EventId> enqueue_kernel(CompiledKernel& k, const LaunchGeometry& g,
                                         const LaunchContext& c,
                                         std::span<const KernelArg> a) override {
    ran = inner_.run_kernel(k, g, c, a);
    ++runs;
    if (!ran.ok()) return ran;
    return EventId{0};
  }
  absl::Status write_buffer(Buffer& b, uint64_t o, std::span<const std::byte> d) override {
    return inner_.write_buffer(b, o, d);
  }
  absl::Status read_buffer(const Buffer& b, uint64_t o, std::span<std::byte> d) override {
    return inner_.read_buffer(b, o, d);
  }
  absl::Status wait(EventId e) override { return inner_.wait(e); }
  absl::Status finish() override { return inner_.finish(); }

  absl::Status ran;
  int runs = 0;

 private:
  Queue& inner_;
};

class RunKernel : public testing::PoclTest {};

TEST_F(RunKernel, RunsTheLaunchToItsEndAfterTheQueuesEarlierLaunches) {
  auto kernel = make_kernel(kFill, {"fill",
                                    std::nullopt,
                                    std::nullopt,
                                    {ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kI32),
                                     ArgSpec::scalar_of(ScalarType::kI32)},
                                    ""});
  ASSERT_NE(kernel, nullptr);
  auto out = make_buffer<int32_t>(4096, -1);
  const NdRange range(Dims{4096});
  // An enqueued launch first, not waited for: the run comes after it.
  KernelArg first[] = {KernelArg::of_buffer(*out), KernelArg::of_scalar(int32_t{1000}),
                       KernelArg::of_scalar(int32_t{0})};
  absl::StatusOr<LaunchResult> enqueued =
      launch(*kernel, queue(), cache(), {&range, nullptr, first});
  ASSERT_TRUE(enqueued.ok()) << enqueued.status();
  RunningQueue running(queue());
  // Read by another queue, which does not wait for this one's launches.
  absl::StatusOr<std::unique_ptr<Queue>> other = device().create_queue();
  ASSERT_TRUE(other.ok()) << other.status();
  for (int32_t v = 1; v <= 3; ++v) {
    KernelArg args[] = {KernelArg::of_buffer(*out), KernelArg::of_scalar(v),
                        KernelArg::of_scalar(int32_t{20000})};
    absl::StatusOr<LaunchResult> r = launch(*kernel, running, cache(), {&range, nullptr, args});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(running.ran.ok()) << running.ran;
    // Ended as run_kernel returned: the buffer holds this run's values.
    std::vector<int32_t> host(4096);
    ASSERT_TRUE((*other)->read_buffer(*out, 0, std::as_writable_bytes(std::span(host))).ok());
    for (int32_t i = 0; i < 4096; ++i) ASSERT_EQ(host[i], v + i) << "run " << v << ", item " << i;
  }
  EXPECT_EQ(running.runs, 3);
  // The earlier launch's event is the queue's as before: waited for, ended.
  EXPECT_TRUE(queue().wait(enqueued->event).ok());
  // And launches enqueued after the runs go on numbering from it.
  absl::StatusOr<LaunchResult> after = launch(*kernel, queue(), cache(), {&range, nullptr, first});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->event, enqueued->event + 1);
  EXPECT_TRUE(queue().wait(after->event).ok());
  EXPECT_EQ(download<int32_t>(*out)[7], 1007);
}

}  // namespace
}  // namespace kad
