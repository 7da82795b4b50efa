// WideChoice: where a kernel's launches of several work-groups run, beside
// a driver that runs them on one core (wide_choice.h), from the times its
// launches took.
#include "server/worker/wide_choice.h"

#include <gtest/gtest.h>

namespace kad::server::worker {
namespace {

constexpr uint64_t kGroups = 16;
constexpr uint64_t kItems = 1 << 20;
constexpr int64_t kUs = 1000;

// Notes `times` launches of kItems on the device `choice` picks, each of
// `narrow_ns` on one core (on its thread's CPU clock) or `wide_ns` on the
// wide device; returns how many ran wide.
int run(WideChoice& choice, int times, int64_t narrow_ns, int64_t wide_ns) {
  int wide = 0;
  for (int i = 0; i < times; ++i) {
    const bool on_wide = choice.runs_wide(kGroups);
    wide += on_wide ? 1 : 0;
    choice.note(on_wide, kGroups, kItems, on_wide ? wide_ns : narrow_ns, on_wide ? -1 : narrow_ns);
  }
  return wide;
}

// Two long launches on one core, then a first one on the wide device (its
// warm-up, which decides nothing), then one that decides.
void try_wide(WideChoice& choice, int64_t narrow_ns, int64_t wide_ns) {
  choice.note(false, kGroups, kItems, narrow_ns, narrow_ns);
  choice.note(false, kGroups, kItems, narrow_ns, narrow_ns);
  ASSERT_TRUE(choice.runs_wide(kGroups));
  choice.note(true, kGroups, kItems, 10 * narrow_ns, -1);  // its first there, with a lazy build
  ASSERT_TRUE(choice.runs_wide(kGroups)) << "the warm-up decides nothing";
  choice.note(true, kGroups, kItems, wide_ns, -1);
}

TEST(WideChoice, AKernelTriesTheWideDeviceAfterTwoLaunchesInARowWorthIt) {
  WideChoice choice;
  EXPECT_FALSE(choice.runs_wide(kGroups)) << "a kernel never launched";
  choice.note(false, kGroups, kItems, WideChoice::kWorthTrying, WideChoice::kWorthTrying);
  EXPECT_FALSE(choice.runs_wide(kGroups)) << "after one long launch (maybe the driver's build)";
  choice.note(false, kGroups, kItems, 100 * kUs, 100 * kUs);
  choice.note(false, kGroups, kItems, WideChoice::kWorthTrying, WideChoice::kWorthTrying);
  EXPECT_FALSE(choice.runs_wide(kGroups)) << "a short launch ended the row";
  choice.note(false, kGroups, kItems, WideChoice::kWorthTrying, WideChoice::kWorthTrying);
  EXPECT_TRUE(choice.runs_wide(kGroups));
  EXPECT_TRUE(choice.involves_wide(kGroups));
  EXPECT_FALSE(choice.runs_wide(1)) << "one work-group: one core on either device";
  EXPECT_FALSE(choice.involves_wide(1));
}

// On a busy machine a launch of a few µs of work may take far longer from
// its enqueue to its end: only its thread's CPU time says whether it is long.
TEST(WideChoice, ALongLaunchOnOneCoreCountsOnlyOnItsThreadsCpuClock) {
  WideChoice choice;
  EXPECT_FALSE(choice.wants_cpu_time(kGroups)) << "a kernel never launched";
  choice.note(false, kGroups, kItems, 500 * kUs, -1);
  EXPECT_TRUE(choice.wants_cpu_time(kGroups)) << "after a launch long from enqueue to end";
  EXPECT_FALSE(choice.wants_cpu_time(1)) << "one work-group: one core on either device";
  choice.note(false, kGroups, kItems, 500 * kUs, -1);
  choice.note(false, kGroups, kItems, 500 * kUs, -1);
  EXPECT_FALSE(choice.runs_wide(kGroups)) << "long only from enqueue to end";
  choice.note(false, kGroups, kItems, 5 * kUs, 5 * kUs);
  EXPECT_FALSE(choice.wants_cpu_time(kGroups)) << "short on the CPU clock";
  choice.note(false, kGroups, kItems, 100 * kUs, -1);
  EXPECT_FALSE(choice.wants_cpu_time(kGroups)) << "short from enqueue to end: short on the CPU";
  // Long on the CPU clock: the kernel's next launches are timed so too,
  // and two of them in a row are worth a try.
  choice.note(false, kGroups, kItems, 500 * kUs, 500 * kUs);
  EXPECT_TRUE(choice.wants_cpu_time(kGroups));
  choice.note(false, kGroups, kItems, 500 * kUs, 500 * kUs);
  EXPECT_TRUE(choice.runs_wide(kGroups));
}

TEST(WideChoice, ABusyMachineSendsNoShortKernelToTheWideDevice) {
  WideChoice choice;
  // Each launch 5 µs of work and 1 ms from enqueue to end, timed on the
  // CPU clock where the choice wants it.
  for (int i = 0; i < 10000; ++i) {
    ASSERT_FALSE(choice.involves_wide(kGroups)) << "launch " << i;
    const bool cpu = choice.wants_cpu_time(kGroups);
    choice.note(false, kGroups, kItems, 1000 * kUs, cpu ? 5 * kUs : -1);
  }
}

// What the client waits for decides: a launch on one core stretched by a
// busy machine, against one over every core.
TEST(WideChoice, TheDevicesCompareByTheirLaunchesTimesFromEnqueueToEnd) {
  WideChoice choice;
  choice.note(false, kGroups, kItems, 600 * kUs, 300 * kUs);
  choice.note(false, kGroups, kItems, 600 * kUs, 300 * kUs);
  ASSERT_TRUE(choice.runs_wide(kGroups));
  choice.note(true, kGroups, kItems, 3000 * kUs, -1);  // the warm-up
  choice.note(true, kGroups, kItems, 400 * kUs, -1);
  EXPECT_TRUE(choice.on_wide()) << "400 µs there against 600 on one core (300 of its CPU)";
}

TEST(WideChoice, ShortLaunchesNeverTryTheWideDevice) {
  WideChoice choice;
  EXPECT_EQ(run(choice, 10000, WideChoice::kWorthTrying - 1, 1), 0);
  EXPECT_FALSE(choice.involves_wide(kGroups));
}

TEST(WideChoice, LaunchesOfOneWorkGroupNeitherCountNorEndARow) {
  WideChoice choice;
  choice.note(false, kGroups, kItems, 300 * kUs, 300 * kUs);
  choice.note(false, 1, kItems, 1, 1);
  choice.note(false, kGroups, kItems, 300 * kUs, 300 * kUs);
  EXPECT_TRUE(choice.runs_wide(kGroups));
}

TEST(WideChoice, AFasterWideDeviceTakesTheKernelAndOneCoreIsTriedEveryEighthLaunch) {
  WideChoice choice;
  try_wide(choice, 1000 * kUs, 500 * kUs);
  EXPECT_TRUE(choice.on_wide());
  EXPECT_EQ(choice.interval(), WideChoice::kFirstInterval);
  // Eight launches there, then a sample on one core (still a launch for
  // the queue's thread), which loses: the interval doubles.
  EXPECT_EQ(run(choice, 8, 1000 * kUs, 500 * kUs), 8);
  EXPECT_FALSE(choice.runs_wide(kGroups));
  EXPECT_TRUE(choice.involves_wide(kGroups));
  EXPECT_EQ(run(choice, 1, 1000 * kUs, 500 * kUs), 0);
  EXPECT_TRUE(choice.on_wide());
  EXPECT_EQ(choice.interval(), 2 * WideChoice::kFirstInterval);
  EXPECT_EQ(run(choice, 16, 1000 * kUs, 500 * kUs), 16);
  EXPECT_FALSE(choice.runs_wide(kGroups));
}

TEST(WideChoice, WhatStaysTrueIsCheckedLessAndLessOftenUpToTheLongestInterval) {
  WideChoice choice;
  try_wide(choice, 1000 * kUs, 500 * kUs);
  // Samples at 8, 16, ..., 1024, then every 1024.
  int launches = 0;
  for (uint32_t interval = WideChoice::kFirstInterval; interval <= WideChoice::kMaxInterval;
       interval *= 2)
    launches += interval + 1;
  launches += 3 * (WideChoice::kMaxInterval + 1);
  const int wide = run(choice, launches, 1000 * kUs, 500 * kUs);
  EXPECT_EQ(launches - wide, 8 + 3) << "samples on one core";
  EXPECT_EQ(choice.interval(), WideChoice::kMaxInterval);
  EXPECT_TRUE(choice.on_wide());
}

TEST(WideChoice, AWideDeviceThatIsNotFasterByAFifthLeavesTheKernelOnOneCore) {
  WideChoice choice;
  try_wide(choice, 1000 * kUs, 850 * kUs);
  EXPECT_FALSE(choice.on_wide());
  EXPECT_EQ(choice.interval(), 4u) << "the first interval of two, doubled";
  // Four long launches on one core, then the wide device again.
  EXPECT_EQ(run(choice, 4, 1000 * kUs, 850 * kUs), 0);
  EXPECT_TRUE(choice.runs_wide(kGroups));
  EXPECT_EQ(run(choice, 1, 1000 * kUs, 850 * kUs), 1);
  EXPECT_EQ(choice.interval(), 8u);
  EXPECT_FALSE(choice.on_wide());
}

TEST(WideChoice, AKernelThatBecameSmallGoesBackToOneCoreAndStaysThere) {
  WideChoice choice;
  try_wide(choice, 1000 * kUs, 500 * kUs);
  ASSERT_TRUE(choice.on_wide());
  // Now each launch is a hand-off to the pool and back (30 µs), or 2 µs on
  // one core: the first sample moves it, and then it never tries again.
  EXPECT_EQ(run(choice, 9, 2 * kUs, 30 * kUs), 8);
  EXPECT_FALSE(choice.on_wide());
  EXPECT_EQ(run(choice, 10000, 2 * kUs, 30 * kUs), 0);
  EXPECT_FALSE(choice.involves_wide(kGroups));
}

TEST(WideChoice, AKernelThatBecameSmallGoesBackToOneCoreOnABusyMachineToo) {
  WideChoice choice;
  try_wide(choice, 1000 * kUs, 500 * kUs);
  ASSERT_TRUE(choice.on_wide());
  EXPECT_EQ(run(choice, 8, 2 * kUs, 30 * kUs), 8);
  ASSERT_FALSE(choice.runs_wide(kGroups));
  // The sample on one core: 2 µs of its CPU, but 500 µs from enqueue to
  // end, longer than the 30 µs launches on the pool.
  choice.note(false, kGroups, kItems, 500 * kUs, 2 * kUs);
  EXPECT_FALSE(choice.on_wide());
}

TEST(WideChoice, LaunchesOfDifferentSizesCompareByTheirTimePerWorkItem) {
  WideChoice choice;
  choice.note(false, kGroups, kItems, 1000 * kUs, 1000 * kUs);
  choice.note(false, kGroups, kItems, 1000 * kUs, 1000 * kUs);
  choice.note(true, kGroups, 4 * kItems, 8000 * kUs, -1);  // the warm-up
  // Longer than the launch on one core, but of four times the items.
  choice.note(true, kGroups, 4 * kItems, 1200 * kUs, -1);
  EXPECT_TRUE(choice.on_wide());
  // And back: a sample of a quarter of the items in a third of the time.
  for (uint32_t i = 0; i < WideChoice::kFirstInterval; ++i)
    choice.note(true, kGroups, 4 * kItems, 1200 * kUs, -1);
  ASSERT_FALSE(choice.runs_wide(kGroups));
  choice.note(false, kGroups, kItems, 400 * kUs, 400 * kUs);
  EXPECT_TRUE(choice.on_wide()) << "0.4 µs per item on one core against 0.3 there";
}

TEST(WideChoice, AKernelWithNoBuildForTheWideDeviceStaysOnOneCore) {
  WideChoice choice;
  choice.note(false, kGroups, kItems, 1000 * kUs, 1000 * kUs);
  choice.note(false, kGroups, kItems, 1000 * kUs, 1000 * kUs);
  ASSERT_TRUE(choice.runs_wide(kGroups));
  choice.rule_out();
  EXPECT_FALSE(choice.runs_wide(kGroups));
  EXPECT_FALSE(choice.involves_wide(kGroups));
}

}  // namespace
}  // namespace kad::server::worker
