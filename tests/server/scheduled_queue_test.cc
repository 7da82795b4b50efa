// ScheduledQueue (DESIGN §8's fair share) on the real PoCL device: launches
// that wait in kad keep their order and their event ids, and a held launch
// the driver refuses when its turn comes is reported once, by the next wait,
// naming it; a failure the device reports once (as a worker's lost launches
// are) reaches the client's wait, whether the client's wait or the queue's
// pump saw it. Failures are injected by a queue that forwards to PoCL's real
// queue: it refuses one chosen enqueue, as a driver out of resources would,
// or reports its first wait as lost, once, as a dead worker's queue does.
#include "server/scheduled_queue.h"

#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/pocl.h"

namespace kad::server {
namespace {

class InjectingQueue final : public Queue {
 public:
  // `refuse`: the enqueue (counting from 1) refused; 0 for none.
  // `lose_once`: the first wait reports its launches lost; later ones find
  // them ended. That first wait answers once a second wait comes, or after
  // a second: a second wait can come only while the first is in the
  // queue, not once it has answered.
  // `refuse_after`: how long the refused enqueue takes, as a driver that
  // refuses only after a while.
  InjectingQueue(std::unique_ptr<Queue> inner, int refuse, bool lose_once = false,
                 std::chrono::milliseconds refuse_after = std::chrono::milliseconds(0))
      : inner_(std::move(inner)),
        refuse_(refuse),
        lose_once_(lose_once),
        refuse_after_(refuse_after) {}
  Device& device() const override { return inner_->device(); }
  absl::StatusOr<EventId> enqueue_kernel(CompiledKernel& k, const LaunchGeometry& g,
                                         const LaunchContext& c,
                                         std::span<const KernelArg> a) override {
    if (std::this_thread::get_id() != created_by_) ++other_threads_;
    if (++calls_ == refuse_) {
      std::this_thread::sleep_for(refuse_after_);
      return absl::ResourceExhaustedError("out of command slots (injected)");
    }
    return inner_->enqueue_kernel(k, g, c, a);
  }
  absl::Status write_buffer(Buffer& b, uint64_t o, std::span<const std::byte> d) override {
    return inner_->write_buffer(b, o, d);
  }
  absl::Status read_buffer(const Buffer& b, uint64_t o, std::span<std::byte> d) override {
    return inner_->read_buffer(b, o, d);
  }
  absl::Status wait(EventId e) override {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ends_open_));
    }
    if (absl::Status s = inner_->wait(e); !s.ok()) return s;
    if (!lose_once_) return absl::OkStatus();
    absl::MutexLock lock(&mu_);
    if (++waits_ > 1) return absl::OkStatus();  // the launches count as ended
    // Answered only once another wait came, or a second passed; the other
    // wait, if it came, is answered first.
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](int* waits) { return *waits > 1; }, &waits_),
                         absl::Seconds(1));
    if (waits_ > 1) {
      mu_.Unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      mu_.Lock();
    }
    entered_.store(true);
    return absl::AbortedError("launch 1 was lost with the worker (injected)");
  }
  absl::Status finish() override { return inner_->finish(); }
  bool ended(EventId e) override {
    {
      absl::MutexLock lock(&mu_);
      if (!ends_open_) return false;
    }
    return inner_->ended(e);
  }
  // Until `open_ends`, no launch of this queue is seen to end (a wait
  // blocks, a look finds none ended): a launch that holds the device's slot
  // for as long as a test needs, however fast the device runs it.
  void hold_ends() {
    absl::MutexLock lock(&mu_);
    ends_open_ = false;
  }
  void open_ends() {
    absl::MutexLock lock(&mu_);
    ends_open_ = true;
  }
  bool lost_reported() const { return entered_.load(); }
  // Launches sent to the device by a thread other than the one that made
  // this queue (the pump's).
  int other_threads() const { return other_threads_.load(); }

 private:
  std::unique_ptr<Queue> inner_;
  const int refuse_;
  const bool lose_once_;
  const std::chrono::milliseconds refuse_after_;
  int calls_ = 0;  // only the queue's one dispatcher at a time calls enqueue_kernel
  const std::thread::id created_by_ = std::this_thread::get_id();
  std::atomic<int> other_threads_{0};
  absl::Mutex mu_;
  int waits_ ABSL_GUARDED_BY(mu_) = 0;
  bool ends_open_ ABSL_GUARDED_BY(mu_) = true;
  std::atomic<bool> entered_{false};
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
  auto real_other = device().create_queue();
  ASSERT_TRUE(real.ok() && real_other.ok());
  int tenant = 0, other_tenant = 0;
  ScheduledQueue queue(scheduler, std::make_unique<InjectingQueue>(*std::move(real), 2), &tenant, 1,
                       0);
  auto gated = std::make_unique<InjectingQueue>(*std::move(real_other), 0);
  InjectingQueue& device_other = *gated;
  ScheduledQueue other(scheduler, std::move(gated), &other_tenant, 1, 0);
  auto kernel = increment();
  auto x = make_buffer<int32_t>(4, 0), y = make_buffer<int32_t>(4, 0);
  const KernelArg args[] = {KernelArg::of_buffer(*x)};
  const NdRange range(Dims{4});
  // Another queue has the one slot until every launch of `queue` waits in
  // kad (its end hidden, however fast the device runs it).
  const KernelArg on_y[] = {KernelArg::of_buffer(*y)};
  device_other.hold_ends();
  ASSERT_TRUE(kad::launch(*kernel, other, cache(), {&range, nullptr, on_y}).ok());
  std::vector<EventId> events;
  for (int i = 0; i < 3; ++i) {
    auto r = kad::launch(*kernel, queue, cache(), {&range, nullptr, args});
    ASSERT_TRUE(r.ok()) << r.status();
    events.push_back(r->event);
  }
  EXPECT_EQ(events, (std::vector<EventId>{1, 2, 3})) << "ids at once, held launches' too";
  EXPECT_EQ(scheduler.stats().held_total, 3u);

  device_other.open_ends();
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
  EXPECT_TRUE(other.finish().ok());
  EXPECT_EQ(scheduler.stats().in_flight, 0u);
}

// Past the depth, a launch whose queue's earlier launches ended on the
// device (with no one looking) goes straight to the device from the
// caller's thread: a look that does not wait frees their slots, and no
// launch is held in kad for the pump to send.
TEST_F(ScheduledQueueTest, ALaunchPastTheDepthGoesStraightToTheDeviceWhenEarlierOnesEnded) {
  DeviceScheduler scheduler(2);
  auto real = device().create_queue();
  ASSERT_TRUE(real.ok()) << real.status();
  auto injecting = std::make_unique<InjectingQueue>(*std::move(real), 0);
  InjectingQueue& sent = *injecting;
  ScheduledQueue queue(scheduler, std::move(injecting), nullptr, 1, 0);
  auto kernel = increment();
  auto x = make_buffer<int32_t>(4, 0);
  const KernelArg args[] = {KernelArg::of_buffer(*x)};
  const NdRange range(Dims{4});
  for (int i = 1; i <= 10; ++i) {
    ASSERT_TRUE(kad::launch(*kernel, queue, cache(), {&range, nullptr, args}).ok());
    // The launch ends meanwhile: looked at below the scheduled queue, which
    // itself does not look.
    for (const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
         !sent.ended(static_cast<EventId>(i)) && std::chrono::steady_clock::now() < give_up;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ASSERT_TRUE(queue.finish().ok());
  std::vector<int32_t> got(4);
  ASSERT_TRUE(queue.read_buffer(*x, 0, std::as_writable_bytes(std::span(got))).ok());
  EXPECT_EQ(got, std::vector<int32_t>(4, 10));
  EXPECT_EQ(scheduler.stats().held_total, 0u);
  EXPECT_EQ(sent.other_threads(), 0) << "launches the pump sent";
}

// A client that waits for its held launch sends it to the device itself
// when the slot is granted: one thread woken between a slot coming free and
// the device, not the queue's pump and then the client.
TEST_F(ScheduledQueueTest, AWaitingClientSendsItsOwnHeldLaunchWhenItsTurnComes) {
  DeviceScheduler scheduler(1);  // one launch on the device
  auto real_a = device().create_queue();
  auto real_b = device().create_queue();
  ASSERT_TRUE(real_a.ok() && real_b.ok());
  int tenant_a = 0, tenant_b = 0;
  auto gated = std::make_unique<InjectingQueue>(*std::move(real_a), 0);
  InjectingQueue& device_a = *gated;
  ScheduledQueue a(scheduler, std::move(gated), &tenant_a, 1, 0);
  auto injecting = std::make_unique<InjectingQueue>(*std::move(real_b), 0);
  InjectingQueue& sent_b = *injecting;
  ScheduledQueue b(scheduler, std::move(injecting), &tenant_b, 1, 0);
  auto kernel = increment();
  auto x = make_buffer<int32_t>(4, 0), y = make_buffer<int32_t>(4, 0);
  const KernelArg on_x[] = {KernelArg::of_buffer(*x)}, on_y[] = {KernelArg::of_buffer(*y)};
  const NdRange range(Dims{4});
  for (int round = 1; round <= 5; ++round) {
    // a has the one slot, and keeps it until b's client waits: b's launch
    // waits in kad, and this thread waits for it. (A launch of a that
    // merely ran long raced this thread on a fast machine: its end could
    // reach b's pump before this thread reached its wait.)
    device_a.hold_ends();
    ASSERT_TRUE(kad::launch(*kernel, a, cache(), {&range, nullptr, on_x}).ok());
    const uint64_t held_before = scheduler.stats().held_total;
    auto r = kad::launch(*kernel, b, cache(), {&range, nullptr, on_y});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(scheduler.stats().held_total, held_before + 1) << "b's launch was not held";
    // a's launch is seen to end once this thread is in b's wait.
    std::thread end_a([&device_a, &b] {
      while (b.clients_dispatching() == 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      device_a.open_ends();
    });
    const absl::Status waited = b.wait(r->event);
    end_a.join();
    ASSERT_TRUE(waited.ok()) << waited;
  }
  EXPECT_EQ(sent_b.other_threads(), 0)
      << "launches of b that its pump sent, not its waiting client";
  std::vector<int32_t> got(4);
  ASSERT_TRUE(b.read_buffer(*y, 0, std::as_writable_bytes(std::span(got))).ok());
  EXPECT_EQ(got, std::vector<int32_t>(4, 5));
  EXPECT_TRUE(a.finish().ok());
  EXPECT_EQ(scheduler.stats().in_flight, 0u);
}

TEST_F(ScheduledQueueTest, AFailureTheDeviceReportsOnceReachesTheWaitWhenThePumpSawItFirst) {
  DeviceScheduler scheduler(1);
  auto real_a = device().create_queue();
  auto real_b = device().create_queue();
  ASSERT_TRUE(real_a.ok() && real_b.ok());
  auto injecting = std::make_unique<InjectingQueue>(*std::move(real_a), 0, /*lose_once=*/true);
  InjectingQueue& device_a = *injecting;
  int tenant_a = 0, tenant_b = 0;
  ScheduledQueue a(scheduler, std::move(injecting), &tenant_a, 1, 0);
  ScheduledQueue b(scheduler, *std::move(real_b), &tenant_b, 1, 0);
  auto kernel = increment();
  auto x = make_buffer<int32_t>(4, 0), y = make_buffer<int32_t>(4, 0);
  const KernelArg on_x[] = {KernelArg::of_buffer(*x)}, on_y[] = {KernelArg::of_buffer(*y)};
  const NdRange range(Dims{4});
  auto first = kad::launch(*kernel, a, cache(), {&range, nullptr, on_x});
  ASSERT_TRUE(first.ok()) << first.status();
  // b's launch waits for the one slot: a's pump waits on the device for
  // a's launch to end, and is told it was lost.
  ASSERT_TRUE(kad::launch(*kernel, b, cache(), {&range, nullptr, on_y}).ok());
  // The client's wait comes meanwhile (or after): either way it reports the loss.
  const absl::Status waited = a.wait(first->event);
  EXPECT_TRUE(device_a.lost_reported());
  EXPECT_EQ(waited.code(), absl::StatusCode::kAborted) << waited;
  EXPECT_EQ(waited.message(), "launch 1 was lost with the worker (injected)");
  EXPECT_TRUE(a.wait(first->event).ok()) << "reported once";
  EXPECT_TRUE(b.finish().ok());
}

// A finish that reads the queue's newest id while the driver is still
// refusing that launch (sent from the caller's thread) does not wait for it
// forever: the id is taken back, and the finish waits for the launches
// before it.
TEST_F(ScheduledQueueTest, AFinishWhileTheDriverRefusesTheNewestLaunchReturns) {
  DeviceScheduler scheduler(4);
  auto real = device().create_queue();
  ASSERT_TRUE(real.ok()) << real.status();
  ScheduledQueue queue(
      scheduler,
      std::make_unique<InjectingQueue>(*std::move(real), 2, false, std::chrono::milliseconds(300)),
      nullptr, 1, 0);
  auto kernel = increment();
  auto x = make_buffer<int32_t>(4, 0);
  const KernelArg args[] = {KernelArg::of_buffer(*x)};
  const NdRange range(Dims{4});
  ASSERT_TRUE(kad::launch(*kernel, queue, cache(), {&range, nullptr, args}).ok());
  std::thread refused([&] {
    EXPECT_FALSE(kad::launch(*kernel, queue, cache(), {&range, nullptr, args}).ok());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // launch 2 is in the driver
  auto finished = std::async(std::launch::async, [&] { return queue.finish(); });
  if (finished.wait_for(std::chrono::seconds(10)) == std::future_status::timeout) {
    ADD_FAILURE() << "the finish waits for the refused launch's id";
    // A launch that takes the id again lets it end.
    EXPECT_TRUE(kad::launch(*kernel, queue, cache(), {&range, nullptr, args}).ok());
  }
  EXPECT_TRUE(finished.get().ok());
  refused.join();
  std::vector<int32_t> got(4);
  ASSERT_TRUE(queue.read_buffer(*x, 0, std::as_writable_bytes(std::span(got))).ok());
  EXPECT_GE(got[0], 1);
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
