// Keepalive (DESIGN §11): a TCP client that vanishes without closing its
// connection — its host down, the network cut, here a stopped process whose
// kernel still holds the socket open — has its session reclaimed once kad's
// keepalive ping goes unanswered (--keepalive-time + --keepalive-timeout).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/e2e/e2e.h"

namespace kad {
namespace {

client::ServiceStatus status_of(const testing::Daemon& daemon) {
  auto observer = Client::connect(daemon.unix_uri(), "observer");
  EXPECT_TRUE(observer.ok()) << observer.status();
  if (!observer.ok()) return {};
  auto s = (*observer)->status();
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : client::ServiceStatus{};
}

TEST(Keepalive, AStoppedTcpClientsSessionIsReclaimedWithinKeepaliveTimeAndTimeout) {
  auto daemon = testing::Daemon::start({"--keepalive-time", "1", "--keepalive-timeout", "1"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const client::ServiceStatus before = status_of(**daemon);
  const std::string ready = absl::StrCat("/tmp/kad-keepalive-", getpid());
  std::filesystem::remove(ready);
  const pid_t holder = testing::spawn({KAD_TEST_CLIENT_PATH, (*daemon)->tcp_uri(), "hold", ready});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(ready) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(ready)) << "the holding client never launched";
  EXPECT_EQ(status_of(**daemon).sessions, before.sessions + 1);

  // Stopped, not killed: the connection stays open, and nothing answers on it.
  ASSERT_EQ(kill(holder, SIGSTOP), 0);
  const auto stopped = std::chrono::steady_clock::now();
  client::ServiceStatus after;
  for (int i = 0; i < 300; ++i) {  // 30 s at most
    after = status_of(**daemon);
    if (after.sessions == before.sessions && after.buffers == before.buffers) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  kill(holder, SIGKILL);
  testing::wait_exit(holder);
  std::filesystem::remove(ready);
  EXPECT_EQ(after.sessions, before.sessions) << "kad still holds the stopped client's session";
  EXPECT_EQ(after.buffers, before.buffers);
  // 1 s idle, 1 s without an answer; the rest is slack for a loaded machine.
  EXPECT_LT(seconds, 15.0);
  if (after.sessions == before.sessions)
    std::printf("a stopped client's session was reclaimed after %.1f s (keepalive 1 s + 1 s)\n",
                seconds);
}

TEST(Keepalive, BadKeepaliveSettingsStopKadAtStartNamingThem) {
  auto daemon = testing::Daemon::start({"--keepalive-time", "0"});
  ASSERT_FALSE(daemon.ok());
  EXPECT_NE(daemon.status().message().find("--keepalive-time"), std::string::npos)
      << daemon.status();
}

}  // namespace
}  // namespace kad
