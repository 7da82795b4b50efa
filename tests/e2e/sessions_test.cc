// Sessions (DESIGN §8): isolation of handles, concurrent client processes,
// reclamation when a client dies, and draining on SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "gmock/gmock.h"
#include "tests/e2e/e2e.h"

namespace kad {
namespace {

using client::Arg;
using client::ArgSpec;
using testing::bytes_of;

class Sessions : public testing::DaemonSuite {
 protected:
  client::ServiceStatus status() {
    auto observer = connect(daemon().unix_uri(), "observer");
    auto s = observer->status();
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : client::ServiceStatus{};
  }
};

TEST_F(Sessions, NoRequestCanNameAnotherSessionsObjects) {
  auto alice = connect(daemon().unix_uri(), "alice");
  auto bob = connect(daemon().tcp_uri(), "bob");
  auto alice_queue = alice->create_queue();
  auto alice_buffer = alice->allocate(16);
  ASSERT_TRUE(alice_queue.ok() && alice_buffer.ok());
  std::vector<int32_t> secret = {1, 2, 3, 4};
  ASSERT_TRUE((*alice_queue)->write(*alice_buffer, 0, bytes_of(secret)).ok());

  // Bob names Alice's handles: each is unknown in his session.
  auto bob_queue = bob->create_queue();
  ASSERT_TRUE(bob_queue.ok());
  std::vector<int32_t> stolen(4, 0);
  absl::Status read = (*bob_queue)->read(*alice_buffer, 0, bytes_of(stolen));
  if (alice_buffer->handle != (*bob_queue)->handle()) {
    EXPECT_EQ(read.code(), absl::StatusCode::kNotFound) << read;
  }
  EXPECT_EQ(bob->free(*alice_buffer).code(), absl::StatusCode::kNotFound);
  // A handle number Bob does own names his object, never Alice's.
  auto bob_buffer = bob->allocate(16);
  ASSERT_TRUE(bob_buffer.ok());
  std::vector<int32_t> zeros(4, 0);
  ASSERT_TRUE((*bob_queue)->write(*bob_buffer, 0, bytes_of(zeros)).ok());
  std::vector<int32_t> check(4, -1);
  ASSERT_TRUE((*alice_queue)->read(*alice_buffer, 0, bytes_of(check)).ok());
  EXPECT_EQ(check, secret);
  // Alice's kernel handle is not Bob's either.
  auto module = alice->load_module("kernel void k(KAD_CONTEXT) {}");
  auto kernel = alice->get_kernel(*module, {"k", {}, {}, {}, {}, ""});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  auto launched = (*bob_queue)->launch(*kernel, client::Dims{4}, nullptr, {});
  EXPECT_EQ(launched.status().code(), absl::StatusCode::kNotFound) << launched.status();
}

TEST_F(Sessions, TwoClientProcessesLaunchConcurrentlyWithCorrectResults) {
  const pid_t a =
      testing::spawn({KAD_TEST_CLIENT_PATH, daemon().unix_uri(), "launches", "150", "3"});
  const pid_t b =
      testing::spawn({KAD_TEST_CLIENT_PATH, daemon().tcp_uri(), "launches", "150", "7"});
  EXPECT_EQ(testing::wait_exit(a), 0);
  EXPECT_EQ(testing::wait_exit(b), 0);
}

TEST_F(Sessions, AKilledClientsResourcesAreReclaimed) {
  const client::ServiceStatus before = status();
  const std::string ready = absl::StrCat("/tmp/kad-hold-", getpid());
  std::filesystem::remove(ready);
  const pid_t holder = testing::spawn({KAD_TEST_CLIENT_PATH, daemon().unix_uri(), "hold", ready});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(ready) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(ready)) << "the holding client never launched";
  const client::ServiceStatus during = status();
  EXPECT_EQ(during.sessions, before.sessions + 1);
  EXPECT_EQ(during.buffers, before.buffers + 4);

  kill(holder, SIGKILL);  // mid-stream: it launches in a loop
  EXPECT_EQ(testing::wait_exit(holder), -SIGKILL);
  std::filesystem::remove(ready);
  client::ServiceStatus after;
  for (int i = 0; i < 500; ++i) {
    after = status();
    if (after.sessions == before.sessions && after.buffers == before.buffers) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(after.sessions, before.sessions);
  EXPECT_EQ(after.buffers, before.buffers);
  EXPECT_EQ(after.queues, before.queues);
  EXPECT_EQ(after.kernels, before.kernels);
  EXPECT_EQ(after.modules, before.modules);
  for (size_t d = 0; d < after.devices.size(); ++d)
    EXPECT_EQ(after.devices[d].buffer_bytes, before.devices[d].buffer_bytes);
}

TEST_F(Sessions, StatusCountsLaunchesNotYetWaitedFor) {
  auto c = connect(daemon().unix_uri(), "depth");
  auto queue = c->create_queue();
  auto module = c->load_module("kernel void nop(KAD_CONTEXT) {}");
  auto kernel = c->get_kernel(*module, {"nop", {}, {}, {}, {}, ""});
  ASSERT_TRUE(queue.ok() && kernel.ok()) << kernel.status();
  const uint64_t before = status().queue_depth;
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE((*queue)->launch(*kernel, client::Dims{4}, nullptr, {}).ok());
  EXPECT_EQ(status().queue_depth, before + 3);
  ASSERT_TRUE((*queue)->wait().ok());
  EXPECT_EQ(status().queue_depth, before);
}

TEST(Drain, SigtermLetsInFlightLaunchesFinishRefusesNewOnesAndExitsZero) {
  auto daemon = testing::Daemon::start();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto client = Client::connect((*daemon)->unix_uri(), "drain");
  ASSERT_TRUE(client.ok());
  auto queue = (*client)->create_queue();
  // A kernel that runs for a while on the CPU.
  auto module = (*client)->load_module(R"(
kernel void slow(KAD_CONTEXT, global long* out) {
  if (!kad_active()) return;
  long acc = 0;
  for (long k = 0; k < 300000000; ++k) acc += k ^ kad_global_linear();
  out[kad_global_linear()] = acc;
})");
  auto kernel = (*client)->get_kernel(*module, {"slow", {}, {}, {}, {ArgSpec::buffer()}, ""});
  auto out = (*client)->allocate(2 * sizeof(int64_t));
  ASSERT_TRUE(queue.ok() && kernel.ok() && out.ok());
  const Arg args[] = {Arg::buffer(*out)};
  auto launched = (*queue)->launch(*kernel, client::Dims{2}, nullptr, args);
  ASSERT_TRUE(launched.ok()) << launched.status();

  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    kill((*daemon)->pid(), SIGTERM);
  });
  absl::Status waited = (*queue)->wait(launched->event);  // in flight when SIGTERM arrives
  stopper.join();
  EXPECT_TRUE(waited.ok()) << waited;
  // Once the signal is handled, new launches are refused (then the daemon goes).
  bool refused = false;
  for (int i = 0; i < 300 && !refused; ++i) {
    refused = !(*queue)->launch(*kernel, client::Dims{2}, nullptr, args).ok();
    if (!refused) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(refused);
  EXPECT_EQ((*daemon)->stop(0), 0) << (*daemon)->log();
  EXPECT_NE((*daemon)->log().find("draining"), std::string::npos);
}

}  // namespace
}  // namespace kad

namespace kad {
namespace {

TEST_F(Sessions, SixteenClientProcessesLaunchThousandsEachWithExactCounts) {
  auto observer = connect(daemon().tcp_uri(), "observer");
  const auto before = observer->status();
  ASSERT_TRUE(before.ok());
  constexpr int kClients = 16, kLaunches = 1500;
  std::vector<pid_t> clients;
  for (int c = 0; c < kClients; ++c) {
    // Most over shared memory; a few over gRPC, to mix transports.
    const std::string uri = c % 4 == 3 ? daemon().tcp_uri() : daemon().unix_uri();
    clients.push_back(testing::spawn(
        {KAD_TEST_CLIENT_PATH, uri, "stress", std::to_string(kLaunches), std::to_string(c + 1)}));
  }
  for (pid_t p : clients) EXPECT_EQ(testing::wait_exit(p), 0);
  const auto after = observer->status();
  ASSERT_TRUE(after.ok());
  // Every launch ran exactly once: none lost, none duplicated.
  EXPECT_EQ(after->launches - before->launches, uint64_t{kClients} * kLaunches);
  EXPECT_EQ(after->queue_depth, 0u);
}

// A queue on shared memory that kad ended while draining, used after kad
// has gone: kad freed the channel's memory when it reaped it, the reason in
// the header with it, and the client still says why, from kad's last message
// on the channel's socket (it said "kad closed the shared-memory channel").
TEST(Drain, AQueueOnSharedMemoryUsedAfterKadHasGoneSaysWhyItsChannelEnded) {
  auto daemon = testing::Daemon::start();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto client = Client::connect((*daemon)->unix_uri() + "?transport=shm", "left-behind");
  ASSERT_TRUE(client.ok()) << client.status();
  auto queue = (*client)->create_queue();
  ASSERT_TRUE(queue.ok()) << queue.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*queue)->ping().ok());
  ASSERT_EQ((*daemon)->stop(SIGTERM), 0) << (*daemon)->log();
  const absl::Status after = (*queue)->ping();
  EXPECT_EQ(after.code(), absl::StatusCode::kUnavailable) << after;
  EXPECT_THAT(std::string(after.message()),
              ::testing::HasSubstr("kad ended this queue's shared-memory channel: "));
}

}  // namespace
}  // namespace kad
