// Issue 11, hangs (DESIGN §8): a kernel that never ends cannot make kad wait
// forever. A launch past --launch-timeout ends its session's worker and the
// wait says DEADLINE_EXCEEDED; closing the session ends its worker at once;
// SIGTERM exits within --drain-timeout. With --no-workers the kernel keeps a
// driver thread of kad's own, and closing and SIGTERM are still bounded.
// Each test has a daemon of its own.
#include <signal.h>

#include <chrono>
#include <span>
#include <thread>

#include "gmock/gmock.h"
#include "tests/e2e/e2e.h"

namespace kad {
namespace {

using client::Arg;
using client::ArgSpec;
using Clock = std::chrono::steady_clock;

// Spins while flag[0] is 0: a fresh buffer is zeros, so it never ends.
constexpr char kSpin[] =
    "kernel void spin(KAD_CONTEXT, global volatile int* flag) {\n"
    "  if (kad_active()) { while (flag[0] == 0) { } }\n}\n";

struct Looper {
  std::unique_ptr<Client> client;
  std::unique_ptr<client::Queue> queue;
  client::Buffer flag;
};

// Starts the never-ending kernel in a session of its own.
Looper start_looping(const std::string& uri, absl::Duration launch_timeout = absl::ZeroDuration()) {
  Looper l;
  auto c = Client::connect(uri, "looper");
  EXPECT_TRUE(c.ok()) << c.status();
  l.client = *std::move(c);
  auto q = l.client->create_queue("", launch_timeout);
  auto b = l.client->allocate(sizeof(int32_t));
  auto m = l.client->load_module(kSpin);
  EXPECT_TRUE(q.ok() && b.ok() && m.ok());
  auto k = l.client->get_kernel(*m, {.entry = "spin", .args = {ArgSpec::buffer()}});
  EXPECT_TRUE(k.ok()) << k.status();
  l.queue = *std::move(q);
  l.flag = *b;
  const Arg args[] = {Arg::buffer(l.flag)};
  auto launched = l.queue->launch(*k, client::Dims{1}, nullptr, args);
  EXPECT_TRUE(launched.ok()) << launched.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let it start spinning
  return l;
}

// SIGTERM with a looping kernel: kad exits 0 after its 2 s drain timeout,
// far sooner than a hang, with room for a loaded machine.
void expect_sigterm_exits_in_time(testing::Daemon& daemon) {
  const auto sent = Clock::now();
  const int code = daemon.stop(SIGTERM);
  const auto took = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - sent);
  EXPECT_EQ(code, 0) << daemon.log();
  EXPECT_LT(took.count(), 15) << daemon.log();
}

TEST(LoopingKernel, WithoutWorkersClosingItsSessionAndThenSigtermEndWithinTheDrainTimeout) {
  auto daemon = testing::Daemon::start({"--drain-timeout", "2", "--no-workers"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto observer = Client::connect((*daemon)->tcp_uri(), "observer");
  ASSERT_TRUE(observer.ok());
  const auto before = (*observer)->status();
  ASSERT_TRUE(before.ok());
  {
    Looper looper = start_looping((*daemon)->unix_uri() + "?transport=grpc");
    ASSERT_NE(looper.client, nullptr);
  }  // the client leaves: kad closes the session
  client::ServiceStatus after;
  const auto give_up = Clock::now() + std::chrono::seconds(20);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    after = *(*observer)->status();
  } while (after.sessions != before->sessions && Clock::now() < give_up);
  EXPECT_EQ(after.sessions, before->sessions) << "the looping session was never closed";
  EXPECT_EQ(after.buffers, before->buffers);
  EXPECT_EQ(after.queues, before->queues);
  // The close gave up waiting for the kernel after the drain timeout, and said so.
  while ((*daemon)->log().find("a closed session's launches still run") == std::string::npos &&
         Clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_THAT((*daemon)->log(), ::testing::HasSubstr("a closed session's launches still run"));
  // And kad serves on: a new session opens and answers.
  auto next = Client::connect((*daemon)->unix_uri(), "next");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE((*next)->create_queue().ok());
  // The closed session's kernel still runs: SIGTERM must not wait for it either.
  next->reset();
  const auto sent = Clock::now();
  EXPECT_EQ((*daemon)->stop(SIGTERM), 0) << (*daemon)->log();
  EXPECT_LT(std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - sent).count(), 15);
  observer->reset();
}

// A closing session whose launches still run waits for them on a thread of
// its own, never on gRPC's: sessions that leave kernels behind (more of them
// than gRPC has threads for callbacks) do not stop everyone else's
// OpenSession for the drain timeout.
TEST(LoopingKernel, WithoutWorkersSessionsClosingOverRunningKernelsDoNotHoldUpNewSessions) {
  auto daemon = testing::Daemon::start({"--drain-timeout", "20", "--no-workers"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto observer = Client::connect((*daemon)->tcp_uri(), "observer");
  ASSERT_TRUE(observer.ok());
  {
    std::vector<Looper> loopers;
    for (int i = 0; i < 6; ++i) {
      loopers.push_back(start_looping((*daemon)->unix_uri() + "?transport=grpc"));
      ASSERT_NE(loopers.back().client, nullptr);
    }
  }  // they leave: each close waits up to 20 s for the kernels
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while ((*observer)->status()->sessions != 1 && Clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ((*observer)->status()->sessions, 1u) << "the sessions were not closed";
  const auto asked = Clock::now();
  auto next = Client::connect((*daemon)->unix_uri(), "next");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE((*next)->create_queue().ok());
  EXPECT_TRUE((*next)->status().ok());
  EXPECT_LT(std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - asked).count(), 8)
      << "a new session waited for the closing ones";
  next->reset();
  observer->reset();
  (*daemon)->stop(SIGKILL);  // its closes would wait out the drain timeout
}

TEST(LoopingKernel, SigtermExitsWithinTheDrainTimeout) {
  auto daemon = testing::Daemon::start({"--drain-timeout", "2"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  Looper looper = start_looping((*daemon)->unix_uri());
  expect_sigterm_exits_in_time(**daemon);
  EXPECT_THAT((*daemon)->log(), ::testing::HasSubstr("launches still run after the drain timeout"));
}

TEST(LoopingKernel, ALaunchPastTheLaunchTimeoutEndsItsWorkerWithDeadlineExceeded) {
  auto daemon = testing::Daemon::start({"--launch-timeout", "2"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto observer = Client::connect((*daemon)->tcp_uri(), "observer");
  ASSERT_TRUE(observer.ok());
  const auto before = (*observer)->status();
  ASSERT_TRUE(before.ok());
  for (const std::string& uri : {(*daemon)->unix_uri(), (*daemon)->tcp_uri()}) {
    Looper looper = start_looping(uri);
    ASSERT_NE(looper.client, nullptr);
    const auto waited = Clock::now();
    const absl::Status status = looper.queue->wait();
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - waited);
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
    EXPECT_THAT(status.message(), ::testing::AllOf(::testing::HasSubstr("kernel `spin` (launch 1)"),
                                                   ::testing::HasSubstr("launch deadline of 2s"),
                                                   ::testing::HasSubstr("launch 1 was lost")));
    EXPECT_LT(took.count(), 10000);
    // Its session goes on, in a new worker, its buffer intact.
    const int32_t one = 1;
    const absl::Status written =
        looper.queue->write(looper.flag, 0, std::as_bytes(std::span(&one, 1)));
    ASSERT_TRUE(written.ok()) << written;
    int32_t back = 0;
    ASSERT_TRUE(
        looper.queue->read(looper.flag, 0, std::as_writable_bytes(std::span(&back, 1))).ok());
    EXPECT_EQ(back, 1);
    testing::expect_bystander_served(uri, 5);
  }
  const client::ServiceStatus after = testing::status_back_to(**observer, *before);
  EXPECT_EQ(after.workers_timed_out, before->workers_timed_out + 2);  // one per transport
  EXPECT_EQ(after.workers_crashed, before->workers_crashed);
  EXPECT_EQ(after.sessions, before->sessions);
  EXPECT_EQ(after.buffers, before->buffers);
  EXPECT_EQ(after.queues, before->queues);
  observer->reset();
  EXPECT_EQ((*daemon)->stop(SIGTERM), 0) << (*daemon)->log();
}

// Nobody has to wait for a launch for its deadline to hold: the pool's
// watchdog ends the worker, and the client hears of it at its next wait.
// On PoCL's basic driver the kernel loops in the thread that serves kad's
// requests (--pocl-worker-driver basic): its deadline still ends the worker
// (kad reads only the progress page), the session goes on in a new one, and
// SIGTERM exits within the drain timeout.
TEST(LoopingKernel, OnPoclsBasicDriverTheDeadlineEndsTheWorkerAndSigtermExitsInTime) {
  auto daemon = testing::Daemon::start(
      {"--pocl-worker-driver", "basic", "--launch-timeout", "2", "--drain-timeout", "2"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_THAT((*daemon)->log(), ::testing::HasSubstr("run on PoCL's basic driver"));
  auto observer = Client::connect((*daemon)->tcp_uri(), "observer");
  ASSERT_TRUE(observer.ok());
  const auto before = (*observer)->status();
  ASSERT_TRUE(before.ok());
  {
    Looper looper = start_looping((*daemon)->unix_uri());
    ASSERT_NE(looper.client, nullptr);
    const absl::Status status = looper.queue->wait();
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
    EXPECT_THAT(status.message(), ::testing::HasSubstr("kernel `spin` (launch 1)"));
    int32_t back = -1;
    ASSERT_TRUE(
        looper.queue->read(looper.flag, 0, std::as_writable_bytes(std::span(&back, 1))).ok());
    EXPECT_EQ(back, 0);
    testing::expect_bystander_served((*daemon)->unix_uri(), 6, testing::kFillSource,
                                     /*shared_memory=*/true);
    testing::expect_bystander_served((*daemon)->tcp_uri(), 7);
  }
  const client::ServiceStatus after = testing::status_back_to(**observer, *before);
  EXPECT_EQ(after.workers_timed_out, before->workers_timed_out + 1);
  EXPECT_EQ(after.workers_crashed, before->workers_crashed);
  EXPECT_EQ(after.sessions, before->sessions);
  EXPECT_EQ(after.buffers, before->buffers);
  EXPECT_EQ(after.queues, before->queues);
  observer->reset();
  Looper looper = start_looping((*daemon)->unix_uri());
  expect_sigterm_exits_in_time(**daemon);
}

TEST(LoopingKernel, ALaunchNobodyWaitsForEndsItsWorkerAtItsDeadline) {
  auto daemon = testing::Daemon::start({"--launch-timeout", "2"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  Looper looper = start_looping((*daemon)->unix_uri());
  ASSERT_NE(looper.client, nullptr);
  const auto give_up = Clock::now() + std::chrono::seconds(20);
  while ((*daemon)->log().find("was killed by signal 9") == std::string::npos &&
         Clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_THAT((*daemon)->log(), ::testing::HasSubstr("was killed by signal 9"));
  const absl::Status status = looper.queue->wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr("kernel `spin` (launch 1) ran past the launch "
                                                     "deadline of 2s"));
  testing::expect_bystander_served((*daemon)->unix_uri(), 9);
}

TEST(LoopingKernel, ClosingItsSessionEndsItsWorkerAtOnce) {
  auto daemon = testing::Daemon::start({"--drain-timeout", "60"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto observer = Client::connect((*daemon)->tcp_uri(), "observer");
  ASSERT_TRUE(observer.ok());
  const auto before = (*observer)->status();
  ASSERT_TRUE(before.ok());
  const auto closed = Clock::now();
  {
    Looper looper = start_looping((*daemon)->unix_uri() + "?transport=grpc");
    ASSERT_NE(looper.client, nullptr);
  }  // the client leaves: kad closes the session and stops its worker
  client::ServiceStatus after;
  const auto give_up = Clock::now() + std::chrono::seconds(20);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    after = *(*observer)->status();
  } while ((after.sessions != before->sessions || after.buffers != before->buffers) &&
           Clock::now() < give_up);
  // Far sooner than the 60 s drain timeout a close waits for in-process kernels.
  EXPECT_LT(std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - closed).count(), 10);
  EXPECT_EQ(after.sessions, before->sessions);
  EXPECT_EQ(after.buffers, before->buffers);
  EXPECT_EQ(after.queues, before->queues);
  EXPECT_EQ(after.queue_depth, before->queue_depth);
  observer->reset();
  // Nothing runs any more: SIGTERM drains at once.
  const auto sent = Clock::now();
  EXPECT_EQ((*daemon)->stop(SIGTERM), 0) << (*daemon)->log();
  EXPECT_LT(std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - sent).count(), 10);
  EXPECT_THAT((*daemon)->log(), ::testing::Not(::testing::HasSubstr("still run")));
}

TEST(LoopingKernel, AQueuesOwnLaunchTimeoutIsKeptAndCappedByTheDaemons) {
  auto daemon = testing::Daemon::start({"--launch-timeout", "30"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto c = Client::connect((*daemon)->unix_uri(), "timeouts");
  ASSERT_TRUE(c.ok()) << c.status();
  auto daemons = (*c)->create_queue();
  auto longer = (*c)->create_queue("", absl::Hours(1));
  ASSERT_TRUE(daemons.ok() && longer.ok());
  EXPECT_EQ((*daemons)->launch_timeout(), absl::Seconds(30));
  EXPECT_EQ((*longer)->launch_timeout(), absl::Seconds(30)) << "not capped by the daemon's";

  Looper looper = start_looping((*daemon)->tcp_uri(), absl::Seconds(1));
  ASSERT_NE(looper.client, nullptr);
  EXPECT_EQ(looper.queue->launch_timeout(), absl::Seconds(1));
  const auto waited = Clock::now();
  const absl::Status status = looper.queue->wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr("launch deadline of 1s"));
  EXPECT_LT(std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - waited).count(), 10);
}

// The deadline is on running, not on waiting: a launch that ended long ago
// is not past its deadline when the client waits for it late.
TEST(LoopingKernel, AWaitLongAfterAShortLaunchIsNotPastItsDeadline) {
  auto daemon = testing::Daemon::start();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto c = Client::connect((*daemon)->tcp_uri(), "late");
  ASSERT_TRUE(c.ok()) << c.status();
  auto q = (*c)->create_queue("", absl::Seconds(1));
  auto b = (*c)->allocate(16 * sizeof(int32_t));
  auto m = (*c)->load_module(testing::kFillSource);
  ASSERT_TRUE(q.ok() && b.ok() && m.ok());
  auto k = (*c)->get_kernel(
      *m,
      {.entry = "fill", .args = {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kI32)}});
  ASSERT_TRUE(k.ok()) << k.status();
  const Arg args[] = {Arg::buffer(*b), Arg::scalar<int32_t>(3)};
  const client::Dims n{16};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*q)->submit(*k, &n, nullptr, args).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past 1 s since submission
  const absl::Status waited = (*q)->wait();
  EXPECT_TRUE(waited.ok()) << waited;
  std::vector<int32_t> got(16);
  ASSERT_TRUE((*q)->read(*b, 0, testing::bytes_of(got)).ok());
  EXPECT_EQ(got, std::vector<int32_t>(16, 3));
}

// Spins while flag[0] is below `ticket`: launches that end one by one as the
// test raises the flag.
constexpr char kStage[] =
    "kernel void stage(KAD_CONTEXT, global volatile int* flag, int ticket) {\n"
    "  if (kad_active()) { while (flag[0] < ticket) { } }\n}\n";

struct Stages {
  std::unique_ptr<Client> client;
  std::unique_ptr<client::Queue> running, other;
  client::Kernel kernel;
  client::Buffer flag;

  // The flag, written through the session's other queue.
  absl::Status raise(int32_t value) {
    return other->write(flag, 0, std::as_bytes(std::span(&value, 1)));
  }
};

Stages start_stages(const std::string& uri, absl::Duration launch_timeout) {
  Stages s;
  auto c = Client::connect(uri, "stages");
  EXPECT_TRUE(c.ok()) << c.status();
  s.client = *std::move(c);
  auto running = s.client->create_queue("", launch_timeout);
  auto other = s.client->create_queue("", launch_timeout);
  auto b = s.client->allocate(sizeof(int32_t));
  auto m = s.client->load_module(kStage);
  EXPECT_TRUE(running.ok() && other.ok() && b.ok() && m.ok());
  auto k = s.client->get_kernel(
      *m, {.entry = "stage",
           .args = {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kI32)}});
  EXPECT_TRUE(k.ok()) << k.status();
  s.running = *std::move(running);
  s.other = *std::move(other);
  s.kernel = *k;
  s.flag = *b;
  return s;
}

// A wait sleeps on its queue's progress page, holding no lock of the
// session's: while one queue waits for a kernel that spins until the flag
// is raised, the session's other queue raises it, and the wait ends well
// within its deadline. (Before, the wait held the session's worker lock and
// the other queue waited for it until the deadline ended the worker.)
TEST(LoopingKernel, ASessionsOtherQueueIsServedWhileOneWaitsForALongLaunch) {
  auto daemon = testing::Daemon::start();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  for (const std::string& uri : {(*daemon)->unix_uri() + "?transport=shm", (*daemon)->tcp_uri()}) {
    Stages s = start_stages(uri, absl::Seconds(10));
    ASSERT_NE(s.client, nullptr);
    const Arg args[] = {Arg::buffer(s.flag), Arg::scalar<int32_t>(1)};
    ASSERT_TRUE(s.running->launch(s.kernel, client::Dims{1}, nullptr, args).ok());
    const auto started = Clock::now();
    absl::Status waited = absl::UnknownError("not waited");
    std::thread waiter([&] { waited = s.running->wait(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the wait sleeps now
    const absl::Status raised = s.raise(1);
    const auto raised_after = Clock::now() - started;
    waiter.join();
    EXPECT_TRUE(raised.ok()) << raised;
    EXPECT_TRUE(waited.ok()) << uri << ": " << waited;
    EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(raised_after).count(), 5000)
        << uri << ": the other queue waited for the first one";
  }
  testing::expect_bystander_served((*daemon)->unix_uri(), 4);
}

// In a pipeline, each launch's deadline counts from the end of the one
// before it, which the worker reports as it happens: three launches of
// about 1.2 s each on a queue with a 3 s deadline all end well, though the
// last ends 3.6 s after they were submitted (each stage has 1.8 s to spare
// for its release to reach the kernel on a loaded machine).
TEST(LoopingKernel, EachLaunchsDeadlineCountsFromTheEndOfTheLaunchBeforeIt) {
  auto daemon = testing::Daemon::start();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  Stages s = start_stages((*daemon)->tcp_uri(), absl::Seconds(3));
  ASSERT_NE(s.client, nullptr);
  for (int32_t ticket = 1; ticket <= 3; ++ticket) {
    const Arg args[] = {Arg::buffer(s.flag), Arg::scalar<int32_t>(ticket)};
    const client::Dims one{1};
    ASSERT_TRUE(s.running->submit(s.kernel, &one, nullptr, args).ok());
  }
  absl::Status waited = absl::UnknownError("not waited");
  std::thread waiter([&] { waited = s.running->wait(); });
  for (int32_t ticket = 1; ticket <= 3; ++ticket) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    ASSERT_TRUE(s.raise(ticket).ok());
  }
  waiter.join();
  EXPECT_TRUE(waited.ok()) << waited;
  // And one launch past its deadline is still ended: the flag never reaches 4.
  const Arg args[] = {Arg::buffer(s.flag), Arg::scalar<int32_t>(4)};
  ASSERT_TRUE(s.running->launch(s.kernel, client::Dims{1}, nullptr, args).ok());
  const absl::Status late = s.running->wait();
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
  EXPECT_THAT(late.message(), ::testing::HasSubstr("kernel `stage` (launch 4)"));
}

TEST(LoopingKernel, WithoutWorkersAQueueHasNoLaunchTimeout) {
  auto daemon = testing::Daemon::start({"--no-workers"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto c = Client::connect((*daemon)->unix_uri(), "timeouts");
  ASSERT_TRUE(c.ok()) << c.status();
  auto q = (*c)->create_queue("", absl::Seconds(5));
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ((*q)->launch_timeout(), absl::ZeroDuration());
}

}  // namespace
}  // namespace kad
