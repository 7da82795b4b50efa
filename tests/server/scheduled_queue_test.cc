// ScheduledQueue (DESIGN §8's fair share) on the real PoCL device: launches
// that wait in kad keep their order and their event ids, and a held launch
// the driver refuses when its turn comes is reported once, by the next wait,
// naming it. The driver's refusal is injected by a queue that forwards to
// PoCL's real queue and refuses one chosen enqueue, as a driver out of
// resources would.
#include "server/scheduled_queue.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/support/pocl.h"

namespace kad::server {
namespace {

class RefusingQueue final : public Queue {
 public:
  RefusingQueue(std::unique_ptr<Queue> inner, int refuse)
      : inner_(std::move(inner)), refuse_(refuse) {}
  Device& device() const override { return inner_->device(); }
  absl::StatusOr<EventId> enqueue_kernel(CompiledKernel& k, const LaunchGeometry& g,
                                         const LaunchContext& c,
                                         std::span<const KernelArg> a) override {
    if (++calls_ == refuse_) return absl::ResourceExhaustedError("out of command slots (injected)");
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
  std::unique_ptr<Queue> inner_;
  const int refuse_;
  int calls_ = 0;  // only the queue's one dispatcher at a time calls enqueue_kernel
};

class ScheduledQueueTest : public testing::PoclTest {
 protected:
  std::unique_ptr<Kernel> increment() {
    return make_kernel(R"(
kernel void increment(KAD_CONTEXT, global int* x) {
  if (kad_active()) x[kad_global_linear()] += 1;
})",
                       {"increment", std::nullopt, std::nullopt, {ArgSpec::buffer()}, ""});
  }
};

TEST_F(ScheduledQueueTest, AHeldLaunchTheDriverRefusesIsReportedOnceByTheNextWaitNamingIt) {
  DeviceScheduler scheduler(1);  // one launch on the device: the rest wait in kad
  auto real = device().create_queue();
  ASSERT_TRUE(real.ok()) << real.status();
  ScheduledQueue queue(scheduler, std::make_unique<RefusingQueue>(*std::move(real), 2), nullptr, 1,
                       0);
  auto kernel = increment();
  auto x = make_buffer<int32_t>(4, 0);
  const KernelArg args[] = {KernelArg::of_buffer(*x)};
  const NdRange range(Dims{4});
  std::vector<EventId> events;
  for (int i = 0; i < 3; ++i) {
    auto r = kad::launch(*kernel, queue, cache(), {&range, nullptr, args});
    ASSERT_TRUE(r.ok()) << r.status();
    events.push_back(r->event);
  }
  EXPECT_EQ(events, (std::vector<EventId>{1, 2, 3})) << "ids at once, held launches' too";
  EXPECT_GT(scheduler.stats().held_total, 0u);

  const absl::Status first = queue.wait(3);
  EXPECT_EQ(first.code(), absl::StatusCode::kResourceExhausted) << first;
  EXPECT_NE(first.message().find("launch 2 on opencl:pocl:0 (it waited in kad for the device)"),
            absl::string_view::npos)
      << first;
  EXPECT_NE(first.message().find("out of command slots (injected)"), absl::string_view::npos)
      << first;
  EXPECT_TRUE(queue.wait(3).ok()) << "reported once";
  std::vector<int32_t> got(4);
  ASSERT_TRUE(queue.read_buffer(*x, 0, std::as_writable_bytes(std::span(got))).ok());
  EXPECT_EQ(got, std::vector<int32_t>(4, 2)) << "launches 1 and 3 ran, in order";
  EXPECT_EQ(scheduler.stats().in_flight, 0u);
}

TEST_F(ScheduledQueueTest, AWaitForAnEventNeverIssuedIsRefusedNamingIt) {
  DeviceScheduler scheduler(4);
  auto real = device().create_queue();
  ASSERT_TRUE(real.ok()) << real.status();
  ScheduledQueue queue(scheduler, *std::move(real), nullptr, 1, 0);
  const absl::Status s = queue.wait(7);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("event 7 was never issued"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace kad::server
