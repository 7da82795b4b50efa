// kad under systemd (DESIGN §10, deploy/systemd/kad.service): the
// sd_notify(3) readiness protocol, received on a socket the test listens on
// as $NOTIFY_SOCKET, the way systemd does for a Type=notify unit; and the
// default socket in the service manager's $RUNTIME_DIRECTORY.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "kad/client.h"
#include "tests/e2e/e2e.h"
#include "tests/support/daemon.h"

namespace kad {
namespace {

using ::testing::HasSubstr;
using testing::read_file;
using ::testing::StartsWith;

// A datagram socket the service manager would listen on: a path, or an
// @abstract name.
class NotifySocket {
 public:
  explicit NotifySocket(std::string address) : address_(std::move(address)) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, address_.data(), address_.size());
    socklen_t length = offsetof(sockaddr_un, sun_path) + address_.size();
    if (address_[0] == '@') {
      a.sun_path[0] = '\0';
    } else {
      unlink(address_.c_str());
      ++length;
    }
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&a), length) == 0;
  }
  ~NotifySocket() {
    close(fd_);
    if (address_[0] == '/') unlink(address_.c_str());
  }
  bool bound() const { return bound_; }
  const std::string& address() const { return address_; }

  // The next message, or "" after `seconds` without one.
  std::string next(int seconds = 30) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, seconds * 1000) != 1) return "";
    char buffer[4096];
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
  }

 private:
  std::string address_;
  int fd_ = -1;
  bool bound_ = false;
};

struct Folder {
  Folder() {
    char name[] = "/tmp/kad-notify-XXXXXX";
    path = mkdtemp(name);
  }
  ~Folder() { std::filesystem::remove_all(path); }
  std::string path;
};

TEST(ServiceManager, KadSaysReadyOnceServingInItsRuntimeDirectoryReloadingOnSighupAndStopping) {
  Folder dir;
  NotifySocket manager(dir.path + "/notify");
  ASSERT_TRUE(manager.bound());
  // No --listen: the default socket is in the runtime directory systemd made.
  const pid_t kad = testing::spawn({"/usr/bin/env", "NOTIFY_SOCKET=" + manager.address(),
                                    "RUNTIME_DIRECTORY=" + dir.path, KAD_DAEMON_PATH},
                                   dir.path + "/kad.log");
  ASSERT_GT(kad, 0);
  const std::string socket = "unix:" + dir.path + "/kad.sock";
  const std::string ready = manager.next();
  EXPECT_THAT(ready, StartsWith("READY=1\n")) << read_file(dir.path + "/kad.log");
  EXPECT_THAT(ready, HasSubstr("STATUS=serving on " + socket));
  // Ready means serving: a client is answered at once.
  auto client = Client::connect(socket, "notify");
  ASSERT_TRUE(client.ok()) << client.status();
  auto devices = (*client)->devices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_FALSE(devices->empty());

  kill(kad, SIGHUP);
  EXPECT_THAT(manager.next(), StartsWith("RELOADING=1\n"));
  EXPECT_EQ(manager.next(), ready);
  client->reset();
  kill(kad, SIGTERM);
  EXPECT_THAT(manager.next(), StartsWith("STOPPING=1\n"));
  EXPECT_EQ(testing::wait_exit(kad), 0) << read_file(dir.path + "/kad.log");
}

// A service's user has no home (none can be made under /proc, even by
// root, as /nonexistent could be): the drivers' caches go
// beside kad's code cache, so PoCL still finds its CPU device and launches.
TEST(ServiceManager, AUserWithoutAHomeStillHasTheCpuDevice) {
  Folder dir;
  const std::string ready = dir.path + "/ready";
  const pid_t kad = testing::spawn(
      {"/usr/bin/env", "-u", "POCL_CACHE_DIR", "-u", "XDG_CACHE_HOME", "-u", "KAD_CACHE_DIR",
       "HOME=/proc/kad-no-home", "CACHE_DIRECTORY=" + dir.path + "/cache", KAD_DAEMON_PATH,
       "--listen", "unix:" + dir.path + "/kad.sock", "--ready-file", ready},
      dir.path + "/kad.log");
  ASSERT_GT(kad, 0);
  for (int i = 0; i < 3000 && !std::filesystem::exists(ready); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(ready)) << read_file(dir.path + "/kad.log");
  testing::expect_bystander_served("unix:" + dir.path + "/kad.sock");
  EXPECT_TRUE(std::filesystem::exists(dir.path + "/cache/drivers/pocl"))
      << read_file(dir.path + "/kad.log");
  kill(kad, SIGTERM);
  EXPECT_EQ(testing::wait_exit(kad), 0);
}

TEST(ServiceManager, AnAbstractNotifySocketIsToldToo) {
  Folder dir;
  NotifySocket manager(absl::StrCat("@kad-test-notify-", getpid()));
  ASSERT_TRUE(manager.bound());
  const pid_t kad = testing::spawn({"/usr/bin/env", "NOTIFY_SOCKET=" + manager.address(),
                                    KAD_DAEMON_PATH, "--listen", "unix:" + dir.path + "/kad.sock"},
                                   dir.path + "/kad.log");
  ASSERT_GT(kad, 0);
  EXPECT_THAT(manager.next(), StartsWith("READY=1\n")) << read_file(dir.path + "/kad.log");
  kill(kad, SIGTERM);
  EXPECT_THAT(manager.next(), StartsWith("STOPPING=1\n"));
  EXPECT_EQ(testing::wait_exit(kad), 0);
}

// A NOTIFY_SOCKET kad cannot use is a warning naming it; kad serves anyway.
TEST(ServiceManager, ANotifySocketKadCannotUseIsAWarningNamingItAndKadServes) {
  Folder dir;
  const std::string ready_file = dir.path + "/ready";
  const pid_t kad =
      testing::spawn({"/usr/bin/env", "NOTIFY_SOCKET=relative/notify", KAD_DAEMON_PATH, "--listen",
                      "unix:" + dir.path + "/kad.sock", "--ready-file", ready_file},
                     dir.path + "/kad.log");
  ASSERT_GT(kad, 0);
  for (int i = 0; i < 3000 && !std::filesystem::exists(ready_file); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(std::filesystem::exists(ready_file)) << read_file(dir.path + "/kad.log");
  EXPECT_THAT(read_file(dir.path + "/kad.log"),
              HasSubstr("NOTIFY_SOCKET `relative/notify` is neither a socket path nor an "
                        "@abstract name"));
  kill(kad, SIGTERM);
  EXPECT_EQ(testing::wait_exit(kad), 0);
}

}  // namespace
}  // namespace kad
