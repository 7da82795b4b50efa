// Issue 11, hangs (DESIGN §8): a kernel that never ends cannot make kad wait
// forever. Closing its session returns within --drain-timeout (its memory
// goes when the kernel ends), and SIGTERM exits within it. Kernels still run
// inside kad on PoCL, so the looping kernel keeps a driver thread until the
// process ends: each test has a daemon of its own.
#include <signal.h>

#include <chrono>
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
Looper start_looping(const std::string& uri) {
  Looper l;
  auto c = Client::connect(uri, "looper");
  EXPECT_TRUE(c.ok()) << c.status();
  l.client = *std::move(c);
  auto q = l.client->create_queue();
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

TEST(LoopingKernel, ClosingItsSessionAndThenSigtermEndWithinTheDrainTimeout) {
  auto daemon = testing::Daemon::start({"--drain-timeout", "2"});
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

TEST(LoopingKernel, SigtermExitsWithinTheDrainTimeout) {
  auto daemon = testing::Daemon::start({"--drain-timeout", "2"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  Looper looper = start_looping((*daemon)->unix_uri());
  const auto sent = Clock::now();
  const int code = (*daemon)->stop(SIGTERM);
  const auto took = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - sent);
  EXPECT_EQ(code, 0) << (*daemon)->log();
  // 2 s of drain, then the exit: far less than a hang, with room for a loaded machine.
  EXPECT_LT(took.count(), 15) << (*daemon)->log();
  EXPECT_THAT((*daemon)->log(), ::testing::HasSubstr("launches still run after the drain timeout"));
}

}  // namespace
}  // namespace kad
