// QueueFinisher when the process can start no more threads: a close or a
// drain never runs the finish on its own thread (a kernel that loops would
// hold it for good: gRPC's callback thread, or main's drain), and the work
// still runs, on the backlog's thread, and counts for wait_all. The work
// here is real: a PoCL queue finished, then what it kept dropped, which the
// test holds up for as long as it likes.
#include "server/queue_finisher.h"

#include <memory>
#include <system_error>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/support/pocl.h"

namespace kad::server {
namespace {

// Starts no thread, as std::thread does in a process at its limit.
std::thread no_thread(std::function<void()>) {
  throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                          "no thread to be had (test)");
}

// Something kept until the queues finish, whose release blocks until the
// test lets it go: a finish that takes as long as the test says.
std::shared_ptr<void> kept_until(absl::Notification& release, absl::Notification& released) {
  return std::shared_ptr<void>(new int(0), [&release, &released](int* p) {
    release.WaitForNotification();
    delete p;
    released.Notify();
  });
}

std::vector<std::shared_ptr<SessionQueue>> one_queue() {
  auto q = std::make_shared<SessionQueue>();
  absl::StatusOr<std::unique_ptr<Queue>> made = testing::pocl_device().create_queue();
  EXPECT_TRUE(made.ok()) << made.status();
  if (made.ok()) q->queue = *std::move(made);
  return {q};
}

TEST(QueueFinisherWithoutThreads, ABoundedFinishReturnsAtItsTimeoutAndTheBacklogRunsTheWork) {
  QueueFinisher finisher(no_thread);
  absl::Notification release, released;
  const auto began = std::chrono::steady_clock::now();
  EXPECT_FALSE(finisher.finish(one_queue(), kept_until(release, released), absl::Milliseconds(200)))
      << "the work cannot have ended: what it keeps is held";
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(5))
      << "the caller ran the work itself";
  EXPECT_FALSE(finisher.wait_all(absl::Milliseconds(50))) << "wait_all missed the backlog's work";
  release.Notify();
  EXPECT_TRUE(released.WaitForNotificationWithTimeout(absl::Seconds(10)))
      << "the backlog never ran the work";
  EXPECT_TRUE(finisher.wait_all(absl::Seconds(10)));
}

TEST(QueueFinisherWithoutThreads, ADetachedFinishNeverRunsOnTheCallersThread) {
  QueueFinisher finisher(no_thread);
  absl::Notification release, released, late;
  const auto began = std::chrono::steady_clock::now();
  finisher.finish_detached(one_queue(), kept_until(release, released), absl::Milliseconds(100),
                           [&late] { late.Notify(); });
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(5))
      << "the caller ran the work itself";
  // A second close behind the first waits its turn on the backlog, and the
  // caller, again, does not.
  absl::Notification release2, released2;
  release2.Notify();
  finisher.finish_detached(one_queue(), kept_until(release2, released2), absl::Seconds(10), [] {});
  EXPECT_FALSE(released2.WaitForNotificationWithTimeout(absl::Milliseconds(200)))
      << "the backlog runs its work in order";
  release.Notify();
  EXPECT_TRUE(released.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(released2.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(finisher.wait_all(absl::Seconds(10)));
  EXPECT_FALSE(late.HasBeenNotified()) << "no thread could watch the work: nothing reports it late";
}

TEST(QueueFinisher, WithThreadsEachFinishRunsOnItsOwnAndTheLateOneIsReported) {
  QueueFinisher finisher;
  absl::Notification release, released, late;
  finisher.finish_detached(one_queue(), kept_until(release, released), absl::Milliseconds(100),
                           [&late] { late.Notify(); });
  absl::Notification release2, released2;
  release2.Notify();
  finisher.finish_detached(one_queue(), kept_until(release2, released2), absl::Seconds(10), [] {});
  EXPECT_TRUE(released2.WaitForNotificationWithTimeout(absl::Seconds(10)))
      << "the second close waited behind the first";
  EXPECT_TRUE(late.WaitForNotificationWithTimeout(absl::Seconds(10)));
  release.Notify();
  EXPECT_TRUE(finisher.wait_all(absl::Seconds(10)));
}

}  // namespace
}  // namespace kad::server
