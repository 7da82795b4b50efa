// EndFrontier (server/worker/end_frontier.h): launch ends called back in any
// order, from many threads, report only what every launch up to it has
// said, so that a failure noted by an earlier launch's late call is never
// passed over by a later launch's report.
#include "server/worker/end_frontier.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kad::server::worker {
namespace {

TEST(EndFrontier, ALaterLaunchCalledBackFirstIsReportedOnlyWithTheOnesBeforeIt) {
  EndFrontier f;
  EXPECT_EQ(f.mark_ended(3), 0u) << "launches 1 and 2 have not said their end";
  EXPECT_EQ(f.mark_ended(2), 0u);
  EXPECT_EQ(f.frontier(), 0u);
  EXPECT_EQ(f.mark_ended(1), 3u) << "the first call makes 1..3 known at once";
  EXPECT_EQ(f.mark_ended(4), 4u);
  EXPECT_EQ(f.frontier(), 4u);
}

TEST(EndFrontier, ASlotReusedAfterItsLaunchEndedStillCountsIt) {
  EndFrontier f;
  constexpr uint64_t kRing = EndFrontier::kRing;
  for (uint64_t s = 2; s <= kRing; ++s) EXPECT_EQ(f.mark_ended(s), 0u);
  EXPECT_EQ(f.mark_ended(1), kRing);
  // Launch kRing + 1 takes launch 1's slot; kRing + 2's comes first.
  EXPECT_EQ(f.mark_ended(kRing + 2), 0u);
  EXPECT_EQ(f.mark_ended(kRing + 1), kRing + 2);
}

// Four threads take launches in order and mark their ends after random
// delays, as a driver's threads call back; launch s waits for s - kRing's
// mark before it takes the slot, as the worker does. Every report must
// cover only launches already marked, and the last covers them all.
TEST(EndFrontier, ManyThreadsCallingBackInAnyOrderNeverReportPastAnUnmarkedLaunch) {
  constexpr uint64_t kLaunches = 3 * EndFrontier::kRing + 123;
  EndFrontier f;
  auto marked = std::make_unique<std::atomic<bool>[]>(kLaunches + 1);
  std::atomic<uint64_t> next{1};
  std::atomic<uint64_t> reported_past_unmarked{0}, highest{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(t);
      uint64_t checked = 0;  // this thread saw every launch up to it marked
      for (uint64_t s; (s = next.fetch_add(1)) <= kLaunches;) {
        if (s > EndFrontier::kRing)
          while (!marked[s - EndFrontier::kRing].load()) std::this_thread::yield();
        if (random() % 8 == 0) std::this_thread::yield();
        marked[s].store(true);
        const uint64_t to = f.mark_ended(s);
        if (to == 0) continue;
        for (; checked < to; ++checked)
          if (!marked[checked + 1].load()) reported_past_unmarked.fetch_add(1);
        uint64_t h = highest.load();
        while (h < to && !highest.compare_exchange_weak(h, to)) {
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(reported_past_unmarked.load(), 0u);
  EXPECT_EQ(f.frontier(), kLaunches);
  EXPECT_EQ(highest.load(), kLaunches);
}

}  // namespace
}  // namespace kad::server::worker
