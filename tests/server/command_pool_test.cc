// The threads that run Submit streams' commands: a command that blocks
// never holds back another, threads start as needed and end when idle.
#include "server/command_pool.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace kad::server {
namespace {

// A task that waits for `release` (if any), then counts itself run.
class Blocking final : public CommandPool::Task {
 public:
  explicit Blocking(absl::Notification* release = nullptr) : release_(release) {}
  void run() override {
    started.Notify();
    if (release_ != nullptr) release_->WaitForNotification();
    ran.fetch_add(1);
  }
  absl::Notification started;
  std::atomic<int> ran{0};

 private:
  absl::Notification* release_;
};

TEST(CommandPool, ATaskThatBlocksDoesNotHoldBackOnePostedAfterIt) {
  CommandPool pool;
  absl::Notification release;
  Blocking blocked(&release), next;
  pool.post(&blocked);
  ASSERT_TRUE(blocked.started.WaitForNotificationWithTimeout(absl::Seconds(10)));
  pool.post(&next);
  EXPECT_TRUE(next.started.WaitForNotificationWithTimeout(absl::Seconds(10)))
      << "a task waited for another that blocks";
  release.Notify();
}

TEST(CommandPool, ThreadsStartWhileAllAreBusyAndEndWhenIdleDownToTheOnesKept) {
  CommandPool pool(/*keep=*/1, /*idle_exit=*/absl::Milliseconds(20));
  absl::Notification release;
  Blocking tasks[4] = {Blocking(&release), Blocking(&release), Blocking(&release),
                       Blocking(&release)};
  for (Blocking& t : tasks) pool.post(&t);
  for (Blocking& t : tasks)
    ASSERT_TRUE(t.started.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(pool.stats().threads, 4u);
  release.Notify();
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (pool.stats().threads > 1 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(pool.stats().threads, 1u);
  // The one kept serves what comes next, without starting another.
  Blocking later;
  pool.post(&later);
  ASSERT_TRUE(later.started.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(pool.stats().started, 4u);
}

TEST(CommandPool, EveryTaskPostedRunsBeforeThePoolEnds) {
  Blocking tasks[16];
  {
    CommandPool pool(/*keep=*/1);
    for (Blocking& t : tasks) pool.post(&t);
  }
  for (Blocking& t : tasks) EXPECT_EQ(t.ran.load(), 1);
}

}  // namespace
}  // namespace kad::server
