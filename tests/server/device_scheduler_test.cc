// DESIGN §8's fair share, as DeviceScheduler decides it: which waiting
// launch gets the next free slot of a shared device. No device: the tests
// play the device, ending launches and giving slots back themselves.
#include "server/device_scheduler.h"

#include <map>
#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace kad::server {
namespace {

using Flow = DeviceScheduler::Flow;

struct Tenant {
  int key;
};

// Holds `n` launches of `flow`.
void hold(DeviceScheduler& s, Flow& flow, int n) {
  absl::MutexLock lock(&s.mu());
  for (int i = 0; i < n; ++i) s.hold_locked(flow);
}

// The device as the tests play it: a granted launch goes to it at once and
// ends, oldest first.
struct PlayedDevice {
  DeviceScheduler& s;
  std::vector<Flow*> flows;
  std::vector<Flow*> on_device;
  // How long each flow's launches run, as the driver would time them; none
  // for a flow whose driver times nothing.
  std::map<const Flow*, double> device_ns = {};

  // Which flow's launch each of the next `slots` freed slots went to.
  std::vector<Flow*> serve(int slots) {
    std::vector<Flow*> order;
    absl::MutexLock lock(&s.mu());
    dispatch(nullptr);  // what was granted before: not the test's
    while (static_cast<int>(order.size()) < slots && !on_device.empty()) {
      Flow* done = on_device.front();
      on_device.erase(on_device.begin());
      const auto timed = device_ns.find(done);
      s.release_locked(*done, 1,
                       timed == device_ns.end() ? DeviceScheduler::Measured{}
                                                : DeviceScheduler::Measured{1, timed->second});
      dispatch(&order);
    }
    return order;
  }
  void dispatch(std::vector<Flow*>* order) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu()) {
    for (Flow* f : flows) {
      while (f->granted() > 0) {
        s.dispatched_locked(*f, true);
        on_device.push_back(f);
        if (order != nullptr) order->push_back(f);
      }
    }
  }
};

int count(const std::vector<Flow*>& order, const Flow* f) {
  return static_cast<int>(std::count(order.begin(), order.end(), f));
}

TEST(DeviceScheduler, UncontendedLaunchesTakeSlotsStraightUpToTheDeviceDepth) {
  DeviceScheduler s(4);
  Tenant t{1};
  auto f = s.join(&t, 1, 0);
  absl::MutexLock lock(&s.mu());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(s.try_take_locked(*f)) << i;
  EXPECT_FALSE(s.try_take_locked(*f)) << "a fifth launch on a device of depth 4";
  s.release_locked(*f, 1);
  EXPECT_TRUE(s.try_take_locked(*f)) << "the slot an ended launch frees";
}

TEST(DeviceScheduler, ALaunchDoesNotTakeAFreeSlotAheadOfOnesAlreadyWaiting) {
  DeviceScheduler s(1);
  Tenant a{1}, b{2};
  auto fa = s.join(&a, 1, 0), fb = s.join(&b, 1, 0);
  absl::MutexLock lock(&s.mu());
  ASSERT_TRUE(s.try_take_locked(*fa));
  s.hold_locked(*fb);
  EXPECT_TRUE(s.anyone_waits_locked());
  EXPECT_TRUE(s.others_wait_locked(*fa));
  EXPECT_FALSE(s.others_wait_locked(*fb));
  s.release_locked(*fa, 1);
  EXPECT_EQ(fb->granted(), 1u) << "the freed slot goes to the launch that waited";
  EXPECT_FALSE(s.try_take_locked(*fa));
}

TEST(DeviceScheduler, AHigherPriorityClassGoesFirstWhateverItHasUsed) {
  DeviceScheduler s(1);
  Tenant low{1}, high{2};
  auto fl = s.join(&low, 8, 0), fh = s.join(&high, 1, 5);
  hold(s, *fl, 10);  // the first goes to the device at once
  hold(s, *fh, 5);
  const std::vector<Flow*> order = PlayedDevice{s, {fl.get(), fh.get()}, {}}.serve(8);
  ASSERT_EQ(order.size(), 8u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(order[i], fh.get()) << "slot " << i;
  for (size_t i = 5; i < 8; ++i) EXPECT_EQ(order[i], fl.get()) << "slot " << i;
}

TEST(DeviceScheduler, WhileQueuesCompeteTheDeviceTakesASixteenthOfItsDepth) {
  DeviceScheduler s(64);
  Tenant a{1}, b{2};
  auto fa = s.join(&a, 1, 0), fb = s.join(&b, 1, 0);
  absl::MutexLock lock(&s.mu());
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(s.try_take_locked(*fa)) << "alone: all 64, " << i;
  s.hold_locked(*fa);
  s.hold_locked(*fb);
  s.release_locked(*fa, 60);
  EXPECT_EQ(fa->granted() + fb->granted(), 0u) << "4 on the device: a contended device's depth";
  s.release_locked(*fa, 1);
  EXPECT_EQ(fb->granted(), 1u) << "b, which has had nothing, first";
  s.release_locked(*fa, 1);
  EXPECT_EQ(fa->granted(), 1u);
  EXPECT_EQ(fa->in_flight() + fb->in_flight(), 4u);
  s.dispatched_locked(*fa, true);
  s.dispatched_locked(*fb, true);
  // b goes: a alone may fill the device again.
  s.release_locked(*fb, 1);
  EXPECT_TRUE(s.try_take_locked(*fa));
  EXPECT_EQ(fa->in_flight() + fb->in_flight(), 4u);
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(s.try_take_locked(*fa)) << i;
}

TEST(DeviceScheduler, OneTenantsQueuesEachPutTheirFirstLaunchOnTheDeviceAtOnce) {
  DeviceScheduler s(64);  // contended: 4 slots
  Tenant t{1};
  std::vector<std::unique_ptr<Flow>> clients;
  for (int i = 0; i < 40; ++i) clients.push_back(s.join(&t, 1, 0));
  auto pipeliner = s.join(&t, 1, 0);
  absl::MutexLock lock(&s.mu());
  // Synchronous clients: one launch each, none waits for another's.
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(s.try_take_locked(*clients[i])) << "client " << i;
  // A pipelining queue of the same tenant: its first, and 4 beyond it.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s.try_take_locked(*pipeliner)) << i;
  EXPECT_FALSE(s.try_take_locked(*pipeliner));
  s.hold_locked(*pipeliner);
  EXPECT_EQ(pipeliner->granted(), 0u);
  EXPECT_FALSE(s.try_take_locked(*clients[0])) << "a second launch waits its turn too";
  // A newcomer's first launch goes ahead of it, up to the device's depth.
  for (int i = 32; i < 40; ++i) ASSERT_TRUE(s.try_take_locked(*clients[i])) << "client " << i;
  uint32_t on_device = pipeliner->in_flight();
  for (auto& c : clients) on_device += c->in_flight();
  EXPECT_EQ(on_device, 45u);
  // The pipeliner's next goes when one of its own launches beyond the first ends.
  s.release_locked(*clients[5], 1);
  EXPECT_EQ(pipeliner->granted(), 0u) << "a client's slot is not beyond a first";
  s.release_locked(*pipeliner, 1);
  EXPECT_EQ(pipeliner->granted(), 1u);
}

TEST(DeviceScheduler, WhereSessionsRunInWorkersOneTenantsQueuesShareTheContendedDepth) {
  DeviceScheduler s(64, DeviceScheduler::OneTenantsQueues::kShareTheContendedDepth,
                    /*compute_units=*/2);
  Tenant t{1};
  std::vector<std::unique_ptr<Flow>> clients;
  for (int i = 0; i < 10; ++i) clients.push_back(s.join(&t, 1, 0));
  absl::MutexLock lock(&s.mu());
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(s.try_take_locked(*clients[i])) << i;
  EXPECT_FALSE(s.try_take_locked(*clients[8]))
      << "8 on the device (4 per compute unit): clients take turns";
  s.hold_locked(*clients[8]);
  s.hold_locked(*clients[9]);
  s.release_locked(*clients[0], 1);
  EXPECT_EQ(clients[8]->granted() + clients[9]->granted(), 1u);
}

TEST(DeviceScheduler, WorkersContendedDepthIsFourLaunchesPerComputeUnitWithinTheDepth) {
  using Q = DeviceScheduler::OneTenantsQueues;
  EXPECT_EQ(DeviceScheduler::contended_depth(64, Q::kShareTheContendedDepth, 2), 8u);
  EXPECT_EQ(DeviceScheduler::contended_depth(64, Q::kShareTheContendedDepth, 1), 4u);
  EXPECT_EQ(DeviceScheduler::contended_depth(64, Q::kShareTheContendedDepth, 32), 64u)
      << "a device of many cores: every slot of its depth";
  EXPECT_EQ(DeviceScheduler::contended_depth(16, Q::kShareTheContendedDepth, 0), 4u)
      << "a device that reports no compute unit has one";
  EXPECT_EQ(DeviceScheduler::contended_depth(1, Q::kShareTheContendedDepth, 2), 1u);
  EXPECT_EQ(DeviceScheduler::contended_depth(64, Q::kShareTheContendedDepth, uint64_t{1} << 62),
            64u)
      << "a driver's huge count of units does not wrap into no slot";
  EXPECT_EQ(DeviceScheduler::contended_depth(64, Q::kFirstLaunchAtOnce, 32), 4u)
      << "sessions in kad's process: depth/16, whatever the device";
  EXPECT_EQ(DeviceScheduler::contended_depth(8, Q::kFirstLaunchAtOnce, 2), 1u);
}

TEST(DeviceScheduler, ASecondTenantMakesEveryLaunchShareTheContendedDepth) {
  DeviceScheduler s(64);  // contended: 4 slots
  Tenant a{1}, b{2};
  std::vector<std::unique_ptr<Flow>> clients;
  for (int i = 0; i < 8; ++i) clients.push_back(s.join(&a, 1, 0));
  auto other = s.join(&b, 1, 0);
  absl::MutexLock lock(&s.mu());
  ASSERT_TRUE(s.try_take_locked(*other));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.try_take_locked(*clients[i])) << i;
  EXPECT_FALSE(s.try_take_locked(*clients[3])) << "4 on the device: weights decide the next";
  // Tenant b pauses between its launches as a synchronous client does: the
  // device stays contended while b may come back.
  s.release_locked(*other, 1);
  ASSERT_TRUE(s.try_take_locked(*clients[3]));
  EXPECT_FALSE(s.try_take_locked(*clients[4])) << "within kIdleCatchUp of b's last launch";
  s.mu().Unlock();
  absl::SleepFor(DeviceScheduler::kIdleCatchUp + absl::Milliseconds(5));
  s.mu().Lock();
  for (int i = 4; i < 8; ++i) EXPECT_TRUE(s.try_take_locked(*clients[i])) << "a alone, " << i;
}

// A lent channel's thread, as far as the scheduler sees it: how often it
// was asked to take its channel back.
struct CountedLender final : ChannelLoans::Lender {
  void recall() override { ++recalls; }
  int recalls = 0;
};

TEST(DeviceScheduler, AQueueIsLentOnlyWhileItsTenantIsAloneOnTheDevice) {
  DeviceScheduler s(64, DeviceScheduler::OneTenantsQueues::kShareTheContendedDepth, 2);
  Tenant a{1}, b{2};
  auto fa = s.join(&a, 1, 0), fb = s.join(&b, 1, 0);
  CountedLender lender;
  absl::MutexLock lock(&s.mu());
  ASSERT_TRUE(s.try_take_locked(*fb));
  EXPECT_FALSE(s.lend_locked(*fa, lender)) << "b has a launch on the device";
  s.release_locked(*fb, 1);
  EXPECT_FALSE(s.lend_locked(*fa, lender)) << "b may come back within kIdleCatchUp";
  s.mu().Unlock();
  absl::SleepFor(DeviceScheduler::kIdleCatchUp + absl::Milliseconds(5));
  s.mu().Lock();
  EXPECT_TRUE(s.lend_locked(*fa, lender)) << "b rested";
  EXPECT_FALSE(s.lend_locked(*fa, lender)) << "lent already";
  s.end_loan_locked(*fa);
  EXPECT_TRUE(s.lend_locked(*fa, lender)) << "again, once it came back";
  EXPECT_EQ(lender.recalls, 0);
}

TEST(DeviceScheduler, AnotherTenantsLaunchRecallsALentQueueAndItsOwnTenantsDoNot) {
  DeviceScheduler s(64, DeviceScheduler::OneTenantsQueues::kShareTheContendedDepth, 2);
  Tenant a{1}, b{2};
  auto lent = s.join(&a, 1, 0), sibling = s.join(&a, 1, 0), other = s.join(&b, 1, 0);
  CountedLender lender;
  absl::MutexLock lock(&s.mu());
  ASSERT_TRUE(s.lend_locked(*lent, lender));
  ASSERT_TRUE(s.try_take_locked(*sibling));
  EXPECT_EQ(lender.recalls, 0) << "the same tenant's queues share the cores as processes";
  ASSERT_TRUE(s.try_take_locked(*other));
  EXPECT_EQ(lender.recalls, 1) << "another tenant's first launch";
  ASSERT_TRUE(s.try_take_locked(*other));
  EXPECT_EQ(lender.recalls, 1) << "once, when the tenant becomes active";
  // Once the loan has ended, another tenant's launch recalls nothing.
  s.end_loan_locked(*lent);
  s.release_locked(*other, 2);
  s.hold_locked(*other);
  EXPECT_EQ(lender.recalls, 1);
}

TEST(DeviceScheduler, ALoanHoldsASlotAndAtMostOneQueuePerComputeUnitIsLent) {
  DeviceScheduler s(64, DeviceScheduler::OneTenantsQueues::kShareTheContendedDepth, 2);
  Tenant a{1};
  std::vector<std::unique_ptr<Flow>> flows;
  std::vector<CountedLender> lenders(3);
  for (int i = 0; i < 3; ++i) flows.push_back(s.join(&a, 1, 0));
  {
    absl::MutexLock lock(&s.mu());
    EXPECT_TRUE(s.lend_locked(*flows[0], lenders[0]));
    EXPECT_TRUE(s.lend_locked(*flows[1], lenders[1]));
    EXPECT_FALSE(s.lend_locked(*flows[2], lenders[2])) << "a third queue on 2 compute units";
  }
  EXPECT_EQ(s.stats().in_flight, 2u);
  absl::MutexLock lock(&s.mu());
  s.end_loan_locked(*flows[0]);
  EXPECT_TRUE(s.lend_locked(*flows[2], lenders[2])) << "the unit a loan gave back";
  for (const CountedLender& l : lenders) EXPECT_EQ(l.recalls, 0);
}

TEST(DeviceScheduler, AQueueBeyondOnePerComputeUnitRecallsEveryLoanUntilTheDeviceRested) {
  DeviceScheduler s(64, DeviceScheduler::OneTenantsQueues::kShareTheContendedDepth, 2);
  Tenant a{1};
  std::vector<std::unique_ptr<Flow>> flows;
  for (int i = 0; i < 4; ++i) flows.push_back(s.join(&a, 1, 0));
  CountedLender lent[2], another;
  absl::MutexLock lock(&s.mu());
  ASSERT_TRUE(s.lend_locked(*flows[0], lent[0]));
  ASSERT_TRUE(s.lend_locked(*flows[1], lent[1]));
  ASSERT_TRUE(s.try_take_locked(*flows[2]));  // the same tenant's third queue
  EXPECT_EQ(lent[0].recalls, 1);
  EXPECT_EQ(lent[1].recalls, 1);
  ASSERT_TRUE(s.try_take_locked(*flows[2]));
  EXPECT_EQ(lent[0].recalls, 1) << "once, as the device becomes crowded";
  s.end_loan_locked(*flows[0]);
  s.end_loan_locked(*flows[1]);
  EXPECT_FALSE(s.lend_locked(*flows[3], another)) << "a queue beside one that has launches there";
  s.release_locked(*flows[2], 2);
  EXPECT_FALSE(s.lend_locked(*flows[3], another)) << "within kIdleCatchUp of the crowd";
  s.mu().Unlock();
  absl::SleepFor(DeviceScheduler::kIdleCatchUp + absl::Milliseconds(5));
  s.mu().Lock();
  EXPECT_TRUE(s.lend_locked(*flows[3], another)) << "the device rested";
}

TEST(DeviceScheduler, ALaunchThatMustWaitForASlotRecallsEveryLoan) {
  // 16 compute units: the contended depth (here the depth, 8) fills before
  // the units do.
  DeviceScheduler s(8, DeviceScheduler::OneTenantsQueues::kShareTheContendedDepth, 16);
  Tenant a{1};
  auto lent = s.join(&a, 1, 0), pipeline = s.join(&a, 1, 0);
  CountedLender lender, another;
  absl::MutexLock lock(&s.mu());
  ASSERT_TRUE(s.lend_locked(*lent, lender));
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(s.try_take_locked(*pipeline)) << i;
  EXPECT_EQ(lender.recalls, 0);
  ASSERT_FALSE(s.try_take_locked(*pipeline));
  s.hold_locked(*pipeline);
  EXPECT_EQ(lender.recalls, 1);
  s.end_loan_locked(*lent);
  EXPECT_EQ(pipeline->granted(), 1u) << "the slot the loan held";
  s.hold_locked(*pipeline);
  EXPECT_FALSE(s.lend_locked(*lent, another)) << "while a launch waits for a slot";
  s.dispatched_locked(*pipeline, true);
  s.release_locked(*pipeline, 1);
  s.dispatched_locked(*pipeline, true);
  s.release_locked(*pipeline, 8);
  EXPECT_TRUE(s.lend_locked(*lent, another)) << "none waits";
}

TEST(DeviceScheduler, ALoanIsRecalledOnceHoweverManyLaunchesWaitUntilItComesBack) {
  // 16 compute units: the contended depth (here the depth, 8) fills before
  // the units do.
  DeviceScheduler s(8, DeviceScheduler::OneTenantsQueues::kShareTheContendedDepth, 16);
  Tenant a{1};
  auto lent = s.join(&a, 1, 0), pipeline = s.join(&a, 1, 0);
  absl::MutexLock lock(&s.mu());
  for (int loan = 1; loan <= 2; ++loan) {
    CountedLender lender;
    ASSERT_TRUE(s.lend_locked(*lent, lender)) << "loan " << loan;
    for (int i = 0; i < 7; ++i) ASSERT_TRUE(s.try_take_locked(*pipeline)) << i;
    // Launches that wait for a slot while the channel is on its way back
    // (a recall wakes two threads): asked once.
    for (int i = 0; i < 5; ++i) s.hold_locked(*pipeline);
    EXPECT_EQ(lender.recalls, 1) << "loan " << loan;
    s.end_loan_locked(*lent);
    // The device drains: each launch that ends lets a waiting one on.
    while (pipeline->held() > 0) {
      ASSERT_GT(pipeline->granted(), 0u);
      s.dispatched_locked(*pipeline, true);
      s.release_locked(*pipeline, 1);
    }
    s.release_locked(*pipeline, pipeline->in_flight());
  }
}

TEST(DeviceScheduler, AQueueAloneThatFilledTheDeviceIsLentAtTheWaitThatEndsItsLaunches) {
  DeviceScheduler s(4, DeviceScheduler::OneTenantsQueues::kShareTheContendedDepth, 2);
  Tenant a{1};
  auto pipeline = s.join(&a, 1, 0);
  CountedLender lender;
  PlayedDevice device{s, {pipeline.get()}, {}};
  hold(s, *pipeline, 10);  // 4 on the device, 6 waiting for slots
  ASSERT_EQ(device.serve(10).size(), 6u);
  while (!device.on_device.empty()) device.serve(1);
  absl::MutexLock lock(&s.mu());
  EXPECT_TRUE(s.lend_locked(*pipeline, lender));
}

TEST(DeviceScheduler, AQueueThatLeavesWhileLentIsNoLongerRecalled) {
  DeviceScheduler s(64);
  Tenant a{1}, b{2};
  auto other = s.join(&b, 1, 0);
  CountedLender lender;
  {
    auto lent = s.join(&a, 1, 0);
    absl::MutexLock lock(&s.mu());
    ASSERT_TRUE(s.lend_locked(*lent, lender));
  }
  absl::MutexLock lock(&s.mu());
  ASSERT_TRUE(s.try_take_locked(*other));
  EXPECT_EQ(lender.recalls, 0);
  s.release_locked(*other, 1);
  s.mu().Unlock();
  EXPECT_EQ(s.stats().in_flight, 0u) << "its loan's slot went with it";
  s.mu().Lock();
}

TEST(DeviceScheduler, ALowerClassKeepsOneSlotWhileAHigherOneIsBusy) {
  DeviceScheduler s(64);  // contended: 4 slots, a lower class then 1
  Tenant low{1}, high{2};
  auto fl = s.join(&low, 1, 0), fh = s.join(&high, 1, 1);
  hold(s, *fl, 70);
  absl::MutexLock lock(&s.mu());
  ASSERT_EQ(fl->granted(), 64u) << "alone";
  for (int i = 0; i < 64; ++i) s.dispatched_locked(*fl, true);
  s.hold_locked(*fh);
  s.release_locked(*fl, 60);
  EXPECT_EQ(fh->granted(), 0u) << "4 on the device";
  s.release_locked(*fl, 1);
  ASSERT_EQ(fh->granted(), 1u) << "the high class's launch takes the first free slot";
  s.dispatched_locked(*fh, true);
  s.release_locked(*fl, 1);
  EXPECT_EQ(fl->granted(), 0u) << "2 low launches still on the device, above its cap of 1";
  s.release_locked(*fl, 1);
  EXPECT_EQ(fl->granted(), 0u) << "1 low launch: its cap";
  s.release_locked(*fl, 1);
  EXPECT_EQ(fl->granted(), 1u);
  s.dispatched_locked(*fl, true);
  // The high class goes quiet; once it has lingered, the low one has the
  // device to itself again.
  s.release_locked(*fh, 1);
  s.regrant_locked();
  EXPECT_EQ(fl->granted(), 0u) << "within the linger";
  s.mu().Unlock();
  absl::SleepFor(DeviceScheduler::kClassLinger + absl::Milliseconds(5));
  s.mu().Lock();
  s.regrant_locked();
  EXPECT_EQ(fl->granted(), 5u) << "the rest of its 70";
}

TEST(DeviceScheduler, TenantsOfOneClassShareSlotsByTheirWeights) {
  DeviceScheduler s(2);
  Tenant heavy{1}, light{2};
  auto fh = s.join(&heavy, 2, 0), fl = s.join(&light, 1, 0);
  hold(s, *fh, 400);
  hold(s, *fl, 400);
  const std::vector<Flow*> order = PlayedDevice{s, {fh.get(), fl.get()}, {}}.serve(300);
  ASSERT_EQ(order.size(), 300u);
  EXPECT_NEAR(count(order, fh.get()), 200, 2);
  EXPECT_NEAR(count(order, fl.get()), 100, 2);
}

TEST(DeviceScheduler, ATenantsShareIsTheSameHoweverManyQueuesItSpreadsOver) {
  DeviceScheduler s(2);
  Tenant one{1}, many{2};
  auto f1 = s.join(&one, 1, 0);
  std::vector<std::unique_ptr<Flow>> fm;
  for (int i = 0; i < 3; ++i) fm.push_back(s.join(&many, 1, 0));
  hold(s, *f1, 400);
  for (auto& f : fm) hold(s, *f, 400);
  const std::vector<Flow*> order =
      PlayedDevice{s, {f1.get(), fm[0].get(), fm[1].get(), fm[2].get()}, {}}.serve(300);
  ASSERT_EQ(order.size(), 300u);
  EXPECT_NEAR(count(order, f1.get()), 150, 2);
  // ... and the tenant's own queues share its half equally.
  for (auto& f : fm) EXPECT_NEAR(count(order, f.get()), 50, 2);
}

TEST(DeviceScheduler, ATenantThatWasIdleDoesNotBankItsIdleTime) {
  DeviceScheduler s(1);
  Tenant busy{1}, late{2};
  auto fb = s.join(&busy, 1, 0), fl = s.join(&late, 1, 0);
  PlayedDevice device{s, {fb.get(), fl.get()}, {}};
  hold(s, *fb, 600);
  ASSERT_EQ(device.serve(300).size(), 300u);  // busy alone uses the device for a while
  hold(s, *fl, 100);
  const std::vector<Flow*> order = device.serve(100);
  ASSERT_EQ(order.size(), 100u);
  // From when it came, the late tenant gets its half, not everything until
  // it has caught up with 300 launches.
  EXPECT_NEAR(count(order, fl.get()), 50, 2);
}

TEST(DeviceScheduler, ATenantsShareCountsTheDeviceTimeOfItsLaunchesNotTheirNumber) {
  DeviceScheduler s(2);
  Tenant longer{1}, shorter{2};
  auto fl = s.join(&longer, 1, 0), fs = s.join(&shorter, 1, 0);
  hold(s, *fl, 400);
  hold(s, *fs, 400);
  // Equal weights: the tenant whose kernels run 8 times longer gets an
  // eighth of the launches, and so half the device's time.
  PlayedDevice device{s, {fl.get(), fs.get()}, {}, {{fl.get(), 80'000}, {fs.get(), 10'000}}};
  ASSERT_EQ(device.serve(90).size(), 90u);  // the estimates learn the kernels' times
  EXPECT_NEAR(fl->estimate_ns(), 80'000, 800);
  EXPECT_NEAR(fs->estimate_ns(), 10'000, 100);
  const std::vector<Flow*> order = device.serve(270);
  ASSERT_EQ(order.size(), 270u);
  EXPECT_NEAR(count(order, fl.get()), 30, 2);
  EXPECT_NEAR(count(order, fs.get()), 240, 2);
}

TEST(DeviceScheduler, WeightsShareDeviceTimeWhenLaunchesDiffer) {
  DeviceScheduler s(2);
  Tenant heavy{1}, light{2};
  auto fh = s.join(&heavy, 2, 0), fl = s.join(&light, 1, 0);
  hold(s, *fh, 400);
  hold(s, *fl, 400);
  // Weight 2 with launches of 40 µs, weight 1 with launches of 10 µs: 2:1
  // in device time is 1:2 in launches.
  PlayedDevice device{s, {fh.get(), fl.get()}, {}, {{fh.get(), 40'000}, {fl.get(), 10'000}}};
  ASSERT_EQ(device.serve(30).size(), 30u);
  const std::vector<Flow*> order = device.serve(300);
  ASSERT_EQ(order.size(), 300u);
  EXPECT_NEAR(count(order, fh.get()), 100, 2);
  EXPECT_NEAR(count(order, fl.get()), 200, 2);
}

TEST(DeviceScheduler, ANewQueueIsFirstChargedTheDevicesRecentMeanLaunchTime) {
  DeviceScheduler s(1);
  Tenant a{1}, b{2};
  auto fa = s.join(&a, 1, 0);
  EXPECT_EQ(fa->estimate_ns(), DeviceScheduler::kUnmeasuredLaunchNs) << "nothing measured yet";
  {
    absl::MutexLock lock(&s.mu());
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(s.try_take_locked(*fa));
      s.release_locked(*fa, 1, {1, 20'000});
    }
  }
  EXPECT_NEAR(fa->estimate_ns(), 20'000, 1);
  auto fb = s.join(&b, 1, 0);
  EXPECT_NEAR(fb->estimate_ns(), 20'000, 100);
}

TEST(DeviceScheduler, ALaunchIsChargedTheDeviceTimeSinceTheLaunchThatEndedBeforeIt) {
  DeviceScheduler s(4);
  absl::MutexLock lock(&s.mu());
  // A long launch from 0 to 100 µs; a short one of another queue reached the
  // device at 10 µs, waited behind it and ran from 100 to 112 µs.
  EXPECT_EQ(s.busy_time_locked(0, 100'000), 100'000);
  EXPECT_EQ(s.busy_time_locked(10'000, 112'000), 12'000);
  // Learnt of late: one that ended at 50 µs is charged from its own start
  // (nothing known ended before it), and one after a gap from its start.
  EXPECT_EQ(s.busy_time_locked(40'000, 50'000), 10'000);
  EXPECT_EQ(s.busy_time_locked(200'000, 205'000), 5'000);
  EXPECT_EQ(s.busy_time_locked(300'000, 300'000), 0) << "no time";
}

TEST(DeviceScheduler, WeightsHoldForSynchronousClientsThatPauseBetweenLaunches) {
  // One launch at a time while queues compete. Each client launches,
  // waits, launches again: between its launches it has nothing waiting,
  // briefly, and keeps its tenant's place.
  DeviceScheduler s(16);
  Tenant heavy{1}, light{2};
  std::vector<std::unique_ptr<Flow>> flows;
  for (int i = 0; i < 2; ++i) flows.push_back(s.join(&heavy, 4, 0));
  for (int i = 0; i < 2; ++i) flows.push_back(s.join(&light, 1, 0));
  absl::MutexLock lock(&s.mu());
  // (The heavy tenant's queues, first and alone, each put a launch on the
  // device; from then on, one at a time.)
  for (auto& f : flows) s.hold_locked(*f);
  std::map<const Tenant*, int> launches;
  for (int i = 0; i < 500; ++i) {
    std::vector<Flow*> running;
    for (size_t k = 0; k < flows.size(); ++k) {
      if (flows[k]->granted() > 0) {
        s.dispatched_locked(*flows[k], true);
        running.push_back(flows[k].get());
        ++launches[k < 2 ? &heavy : &light];
      }
    }
    ASSERT_FALSE(running.empty()) << "the device took nothing at step " << i;
    for (Flow* f : running) {
      s.release_locked(*f, 1);  // it ended; its client launches again
      s.hold_locked(*f);
    }
  }
  EXPECT_NEAR(launches[&heavy], 400, 5);
  EXPECT_NEAR(launches[&light], 100, 5);
}

TEST(DeviceScheduler, AFlowThatLeavesGivesItsSlotsToThoseWaiting) {
  DeviceScheduler s(2);
  Tenant a{1}, b{2};
  auto fb = s.join(&b, 1, 0);
  {
    auto fa = s.join(&a, 1, 0);
    absl::MutexLock lock(&s.mu());
    ASSERT_TRUE(s.try_take_locked(*fa));
    ASSERT_TRUE(s.try_take_locked(*fa));
    s.hold_locked(*fb);
    s.hold_locked(*fb);
    EXPECT_EQ(fb->granted(), 0u);
  }
  EXPECT_EQ(fb->granted(), 2u) << "a queue that went (its session closed) holds no slot";
  EXPECT_EQ(s.stats().in_flight, 2u);
}

TEST(DeviceScheduler, ADispatchTheDriverRefusedGivesItsSlotBack) {
  DeviceScheduler s(1);
  Tenant a{1};
  auto f = s.join(&a, 1, 0);
  absl::MutexLock lock(&s.mu());
  s.hold_locked(*f);
  ASSERT_EQ(f->granted(), 1u);
  s.dispatched_locked(*f, false);
  EXPECT_EQ(f->in_flight(), 0u);
  EXPECT_TRUE(s.try_take_locked(*f));
}

TEST(DeviceScheduler, StatsCountWhatIsOnTheDeviceAndWhatWaits) {
  DeviceScheduler s(2);
  Tenant a{1};
  auto f = s.join(&a, 1, 0);
  hold(s, *f, 5);
  const DeviceScheduler::Stats st = s.stats();
  EXPECT_EQ(st.depth, 2u);
  EXPECT_EQ(st.in_flight, 2u);
  EXPECT_EQ(st.held, 5u) << "held launches, the two granted ones not yet sent included";
  EXPECT_EQ(st.waiting_queues, 1u);
  EXPECT_EQ(st.held_total, 5u);
}

}  // namespace
}  // namespace kad::server
