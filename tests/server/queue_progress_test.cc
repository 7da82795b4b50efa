// A queue's progress page (server/worker/queue_progress.h) between two real
// processes: what one reports the other reads, a sleeper wakes at once when
// a report comes and at its timeout when none does, and the page a daemon
// makes cannot be resized by the worker it is given to.
#include "server/worker/queue_progress.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "gtest/gtest.h"

namespace kad::server::worker {
namespace {

using Clock = std::chrono::steady_clock;

TEST(QueueProgress, AReportInAnotherProcessWakesTheSleeperAtOnce) {
  auto page = ProgressPage::create();
  ASSERT_TRUE(page.ok()) << page.status();
  const uint32_t seen = (*page)->progress().changes.load();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the worker: maps the page it was given, reports launch 3
    auto mine = ProgressPage::map(fcntl((*page)->fd(), F_DUPFD_CLOEXEC, 0));
    if (!mine.ok()) _exit(2);
    usleep(100'000);
    (*mine)->report_failure();
    (*mine)->report(3);
    _exit(0);
  }
  const auto start = Clock::now();
  while ((*page)->progress().changes.load() == seen &&
         Clock::now() - start < std::chrono::seconds(10))
    (*page)->sleep_while_unchanged(seen, absl::Seconds(10));
  const auto waited = Clock::now() - start;
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ((*page)->progress().completed.load(), 3u);
  EXPECT_EQ((*page)->progress().failed.load(), 1u);
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count(), 5000)
      << "woken by the report, not by the timeout";
}

TEST(QueueProgress, ASleeperWithNothingReportedWakesAtItsTimeout) {
  auto page = ProgressPage::create();
  ASSERT_TRUE(page.ok()) << page.status();
  const auto start = Clock::now();
  (*page)->sleep_while_unchanged((*page)->progress().changes.load(), absl::Milliseconds(50));
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  EXPECT_GE(waited.count(), 40);
  EXPECT_LT(waited.count(), 5000);
  EXPECT_EQ((*page)->progress().waiters.load(), 0u) << "a sleeper counts itself out again";
}

TEST(QueueProgress, TheWorkerCannotResizeThePage) {
  auto page = ProgressPage::create();
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_NE(ftruncate((*page)->fd(), 0), 0) << "sealed against shrinking";
  EXPECT_NE(ftruncate((*page)->fd(), kProgressBytes * 2), 0) << "sealed against growing";
}

}  // namespace
}  // namespace kad::server::worker
