// DESIGN §8, identity over a UNIX socket: who may connect is the socket's
// mode and group (--socket-mode, default 0660; --socket-group, default `kad`
// if it exists); a socket another daemon serves is never taken over, a
// stale one is replaced. Session ids are the sessions' credentials: long,
// from a CSPRNG, and never in the daemon's log. Real kad processes.
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kad/client.h"
#include "kad/shm/v1/handshake.h"
#include "kad/shm/v1/layout.h"
#include "tests/e2e/e2e.h"
#include "tests/support/daemon.h"

namespace kad::testing {
namespace {

namespace fs = std::filesystem;

std::string path_of(const std::string& unix_uri) { return unix_uri.substr(5); }

// The daemon's shared-memory socket, with the test daemon's folder
// (mkdtemp's, 0700: the test's) opened to other uids too.
sockaddr_un shm_socket_for_other_uids(const Daemon& d) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string shm_path = path_of(d.unix_uri()) + ".shm";
  std::strncpy(addr.sun_path, shm_path.c_str(), sizeof(addr.sun_path) - 1);
  const fs::path folder = fs::path(shm_path).parent_path();
  EXPECT_NE(folder.string().find("/kad-test-"), std::string::npos) << folder;
  EXPECT_EQ(chmod(folder.c_str(), 0755), 0);
  return addr;
}

uint32_t mode_of(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return 0xffffffff;
  return st.st_mode & 0777;
}

gid_t group_of(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_gid : static_cast<gid_t>(-1);
}

// errno of connecting to `path` (0: connected), from a child process that
// runs as `uid`/`gid` with no supplementary groups.
int connect_as(const std::string& path, uid_t uid, gid_t gid) {
  const pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(200);
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    const int r = connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
    _exit(r == 0 ? 0 : std::min(errno, 199));
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

// Runs kad with `args` until it exits or `ready_file` appears (then
// returns -1000 and leaves it running as *pid).
int run_until_ready(std::vector<std::string> args, const std::string& ready_file,
                    const std::string& log, pid_t* pid) {
  args.insert(args.begin(), KAD_DAEMON_PATH);
  *pid = spawn(args, log);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(*pid, &status, WNOHANG) == *pid) {
      *pid = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }
    if (!ready_file.empty() && fs::exists(ready_file)) return -1000;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -2000;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(SocketAccess, TheSocketsAreForTheOwnerAndTheGroupByDefault) {
  auto d = Daemon::start({"--no-workers"});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string path = path_of((*d)->unix_uri());
  EXPECT_EQ(mode_of(path), 0660u);
  EXPECT_EQ(mode_of(path + ".shm"), 0660u);
  if (const group* kad = getgrnam("kad")) {
    EXPECT_EQ(group_of(path), kad->gr_gid);
    EXPECT_EQ(group_of(path + ".shm"), kad->gr_gid);
  }
}

TEST(SocketAccess, TheSocketsModeAndGroupAreConfigurable) {
  const group* daemon_group = getgrnam("daemon");
  if (daemon_group == nullptr) GTEST_SKIP() << "no group `daemon` on this machine";
  const gid_t gid = daemon_group->gr_gid;
  auto d = Daemon::start({"--no-workers", "--socket-mode", "0600", "--socket-group", "daemon"});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string path = path_of((*d)->unix_uri());
  EXPECT_EQ(mode_of(path), 0600u);
  EXPECT_EQ(mode_of(path + ".shm"), 0600u);
  EXPECT_EQ(group_of(path), gid);
  EXPECT_EQ(group_of(path + ".shm"), gid);
  // Still served: the owner connects.
  auto client = Client::connect((*d)->unix_uri(), "owner");
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->devices().ok());
}

TEST(SocketAccess, APeerOfAnotherUidWithoutAccessIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as a second uid";
  constexpr uid_t kOther = 65534;  // nobody, in no group of the socket's
  auto closed = Daemon::start({"--no-workers"});
  ASSERT_TRUE(closed.ok()) << closed.status();
  // The test's folder is the owner's: open it so only the socket's mode decides.
  const std::string path = path_of((*closed)->unix_uri());
  chmod(fs::path(path).parent_path().c_str(), 0755);
  EXPECT_EQ(connect_as(path, kOther, kOther), EACCES);
  EXPECT_EQ(connect_as(path + ".shm", kOther, kOther), EACCES);

  // The same peer reaches a socket whose mode lets everyone in.
  auto open = Daemon::start({"--no-workers", "--socket-mode", "0666"});
  ASSERT_TRUE(open.ok()) << open.status();
  const std::string open_path = path_of((*open)->unix_uri());
  chmod(fs::path(open_path).parent_path().c_str(), 0755);
  EXPECT_EQ(connect_as(open_path, kOther, kOther), 0);
}

TEST(SocketAccess, ASocketAnotherDaemonServesIsNotTakenOverAndAStaleOneIsReplaced) {
  auto first = Daemon::start({"--no-workers"});
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string path = path_of((*first)->unix_uri());
  const std::string dir = fs::path(path).parent_path().string();

  pid_t second = -1;
  const int refused = run_until_ready({"--no-workers", "--listen", "unix:" + path}, "",
                                      dir + "/second.log", &second);
  EXPECT_NE(refused, 0);
  EXPECT_TRUE(absl::StrContains(read_all(dir + "/second.log"),
                                absl::StrCat("another daemon serves on ", path)))
      << read_all(dir + "/second.log");
  // The first still serves on it.
  auto client = Client::connect((*first)->unix_uri(), "still");
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->devices().ok());
  client->reset();

  // Killed, the first leaves its socket files behind: a new daemon replaces them.
  (*first)->stop(SIGKILL);
  ASSERT_TRUE(fs::exists(path));
  pid_t third = -1;
  const int served = run_until_ready(
      {"--no-workers", "--listen", "unix:" + path, "--ready-file", dir + "/third.ready"},
      dir + "/third.ready", dir + "/third.log", &third);
  ASSERT_EQ(served, -1000) << read_all(dir + "/third.log");
  auto again = Client::connect("unix:" + path, "again");
  EXPECT_TRUE(again.ok()) << again.status();
  if (again.ok()) {
    EXPECT_TRUE((*again)->devices().ok());
  }
  again = absl::UnknownError("closed");
  kill(third, SIGTERM);
  EXPECT_EQ(wait_exit(third), 0);
}

TEST(SocketAccess, AModeOrGroupKadCannotUseIsRefusedNamingIt) {
  char dir[] = "/tmp/kad-socket-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string base = dir;
  pid_t pid = -1;
  EXPECT_EQ(run_until_ready(
                {"--no-workers", "--listen", "unix:" + base + "/a.sock", "--socket-mode", "0999"},
                "", base + "/mode.log", &pid),
            2);
  EXPECT_TRUE(absl::StrContains(read_all(base + "/mode.log"),
                                "--socket-mode `0999` is not a file mode in octal"))
      << read_all(base + "/mode.log");
  EXPECT_NE(run_until_ready({"--no-workers", "--listen", "unix:" + base + "/b.sock",
                             "--socket-group", "no-such-group-kad"},
                            "", base + "/group.log", &pid),
            0);
  EXPECT_TRUE(
      absl::StrContains(read_all(base + "/group.log"), "no group is named `no-such-group-kad`"))
      << read_all(base + "/group.log");
  fs::remove_all(base);
}

// A session id is not enough over shared memory: a handshake for a session
// opened over the UNIX socket must come from the uid that opened it (or
// root). A process of another uid that learnt the id, on a socket it may
// reach (mode 0666 here), is refused PERMISSION_DENIED.
TEST(SessionIds, OverSharedMemoryServeOnlyTheUidThatOpenedTheSession) {
  if (geteuid() != 0) GTEST_SKIP() << "acting as another uid needs root";
  auto d = Daemon::start({"--no-workers", "--socket-mode", "0666"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto owner = Client::connect((*d)->unix_uri() + "?transport=grpc", "owner");
  ASSERT_TRUE(owner.ok()) << owner.status();
  auto queue = (*owner)->create_queue();
  ASSERT_TRUE(queue.ok()) << queue.status();
  // Prepared before the fork: the child allocates nothing.
  shm::v1::Hello hello{};
  hello.request = static_cast<uint32_t>(shm::v1::Request::kHello);
  hello.version = shm::v1::kVersion;
  const std::string id = (*owner)->session_id();
  std::memcpy(hello.session_id, id.data(), std::min(id.size(), sizeof(hello.session_id)));
  hello.queue = (*queue)->handle();
  sockaddr_un addr = shm_socket_for_other_uids(**d);
  constexpr uid_t kNobody = 65534;
  const pid_t child = fork();
  if (child == 0) {
    if (setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(10);
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) _exit(11);
    if (send(fd, &hello, sizeof(hello), 0) != static_cast<ssize_t>(sizeof(hello))) _exit(12);
    shm::v1::Reply reply{};
    int memfd = -1;
    if (!shm::v1::receive_reply(fd, &reply, &memfd)) _exit(13);
    if (memfd >= 0) _exit(14);  // it was handed the channel
    if (reply.code != static_cast<int32_t>(absl::StatusCode::kPermissionDenied)) _exit(15);
    const absl::string_view said(reply.message, std::min<size_t>(reply.message_length, 240));
    _exit(said.find("not opened by this connection's user (uid 65534)") != said.npos ? 0 : 16);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  // 10: could not become nobody; 11: could not connect; 12, 13: the
  // handshake failed; 14: the channel was handed over; 15, 16: another code
  // or message than PERMISSION_DENIED naming the uid.
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The owner still opens its own channel.
  auto over_shm = Client::connect((*d)->unix_uri() + "?transport=shm", "owner-shm");
  ASSERT_TRUE(over_shm.ok()) << over_shm.status();
  auto shm_queue = (*over_shm)->create_queue();
  ASSERT_TRUE(shm_queue.ok()) << shm_queue.status();
  EXPECT_TRUE((*shm_queue)->shared_memory());
}

TEST(SessionIds, AreLongRandomAndNeverLogged) {
  auto d = Daemon::start({"--no-workers", "--log-level", "debug"});
  ASSERT_TRUE(d.ok()) << d.status();
  std::set<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto client = Client::connect((*d)->unix_uri(), "ids");
    ASSERT_TRUE(client.ok()) << client.status();
    const std::string id = (*client)->session_id();
    EXPECT_EQ(id.size(), 48u) << id;  // 192 bits
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    ids.insert(id);
    // A queue on shared memory and the channel's end: both are logged.
    auto devices = (*client)->devices();
    ASSERT_TRUE(devices.ok() && !devices->empty());
    auto queue = (*client)->create_queue(devices->front().id);
    ASSERT_TRUE(queue.ok()) << queue.status();
    ASSERT_TRUE((*queue)->ping().ok());
  }
  EXPECT_EQ(ids.size(), 3u);
  // Give the daemon a moment to log the sessions' ends.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string log = (*d)->log();
  EXPECT_TRUE(absl::StrContains(log, "on shared memory")) << log;
  for (const std::string& id : ids) {
    EXPECT_FALSE(absl::StrContains(log, id)) << "the log holds a session id";
    EXPECT_FALSE(absl::StrContains(log, id.substr(0, 16))) << "the log holds part of a session id";
  }
}

// A session's transports are bounded: past --max-channels-per-session and
// --max-streams-per-session a queue's channel or stream is refused with
// RESOURCE_EXHAUSTED naming the limit, and other sessions go on.
TEST(SessionTransports, AreBoundedPerSessionAndOthersGoOn) {
  auto threads = Daemon::start(
      {"--no-workers", "--max-channels-per-session", "3", "--max-streams-per-session", "2"});
  ASSERT_TRUE(threads.ok()) << threads.status();
  auto reactors = Daemon::start(
      {"--no-workers", "--max-streams-per-session", "2", "--submit-streams", "reactors"});
  ASSERT_TRUE(reactors.ok()) << reactors.status();
  for (const std::string mode : {"shm", "grpc", "grpc-reactors"}) {
    SCOPED_TRACE(mode);
    const std::string transport = mode == "shm" ? "shm" : "grpc";
    auto& d = mode == "grpc-reactors" ? reactors : threads;
    const int limit = transport == "shm" ? 3 : 2;
    auto greedy = Client::connect((*d)->unix_uri() + "?transport=" + transport, "greedy");
    ASSERT_TRUE(greedy.ok()) << greedy.status();
    std::vector<std::unique_ptr<client::Queue>> queues;
    absl::Status refused;
    for (int i = 0; i < limit + 5 && refused.ok(); ++i) {
      auto q = (*greedy)->create_queue();
      absl::Status s = q.ok() ? (*q)->ping() : q.status();
      if (s.ok()) {
        queues.push_back(*std::move(q));
      } else {
        refused = s;
      }
    }
    EXPECT_EQ(static_cast<int>(queues.size()), limit);
    EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
    EXPECT_TRUE(
        absl::StrContains(refused.message(), absl::StrCat("the session already has ", limit)))
        << refused;

    // Another session is served meanwhile.
    auto bystander = Client::connect((*d)->unix_uri() + "?transport=" + transport, "bystander");
    ASSERT_TRUE(bystander.ok()) << bystander.status();
    auto queue = (*bystander)->create_queue();
    ASSERT_TRUE(queue.ok()) << queue.status();
    auto buffer = (*bystander)->allocate(64 * sizeof(int32_t));
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    std::vector<int32_t> data(64, 5), back(64, 0);
    ASSERT_TRUE((*queue)->write(*buffer, 0, std::as_bytes(std::span(data))).ok());
    ASSERT_TRUE((*queue)->read(*buffer, 0, std::as_writable_bytes(std::span(back))).ok());
    EXPECT_EQ(back, data);

    // A queue that goes gives its slot back, once kad has seen it go (a
    // channel's end is noticed by kad's thread that serves it, a stream's
    // when gRPC is done with it: on a busy machine, more than 200 ms
    // later). Over gRPC a queue opens its stream at its first command.
    queues.pop_back();
    absl::Status again = absl::UnknownError("not tried");
    for (const absl::Time give_up = absl::Now() + absl::Seconds(10);
         !again.ok() && absl::Now() < give_up;) {
      auto q = (*greedy)->create_queue();
      again = q.ok() ? (*q)->ping() : q.status();
      if (!again.ok()) {
        EXPECT_EQ(again.code(), absl::StatusCode::kResourceExhausted) << again;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    EXPECT_TRUE(again.ok()) << again;
  }
}

// A connection to the shared-memory socket that says nothing holds a
// handshake thread for up to a second. One uid holds at most four; 64 more
// of its connections wait their turn, and past those one more is refused at
// once, saying why. Another user's silent connections, 80 at a time and
// opened again and again (16 once took every handshake, everyone's), leave
// this user's clients their shared memory.
TEST(ShmHandshakes, OneUsersSilentConnectionsLeaveOtherUsersTheirHandshakes) {
  if (geteuid() != 0) GTEST_SKIP() << "acting as another uid needs root";
  auto d = Daemon::start({"--socket-mode", "0666"});
  ASSERT_TRUE(d.ok()) << d.status();
  sockaddr_un addr = shm_socket_for_other_uids(**d);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  constexpr uid_t kNobody = 65534;
  constexpr int kSilent = 80;
  const pid_t child = fork();
  if (child == 0) {
    close(ready[0]);
    if (setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(10);
    int fds[kSilent];
    auto open_all = [&] {
      for (int& fd : fds) {
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) _exit(11);
      }
    };
    open_all();
    // Those refused are answered at once, saying why; the others wait, and
    // kad drops them after a second of silence each.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    pollfd polled[kSilent];
    for (int i = 0; i < kSilent; ++i) polled[i] = {fds[i], POLLIN, 0};
    if (poll(polled, kSilent, 0) < 0) _exit(13);
    int refused = 0;
    for (const pollfd& p : polled) {
      if ((p.revents & POLLIN) == 0) continue;
      shm::v1::Reply reply;
      int fd = -1;
      if (shm::v1::receive_reply(p.fd, &reply, &fd) &&
          reply.code == static_cast<int32_t>(absl::StatusCode::kUnavailable) &&
          absl::StrContains(std::string(reply.message, std::min<size_t>(reply.message_length,
                                                                        sizeof(reply.message))),
                            "kad has 64 other shared-memory connections of uid 65534 waiting "
                            "for their handshake; try again"))
        ++refused;
    }
    if (write(ready[1], &refused, sizeof refused) != sizeof refused) _exit(12);
    for (int round = 0; round < 20; ++round) {  // until the parent has its answer
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      for (int fd : fds) close(fd);
      open_all();
    }
    _exit(0);
  }
  close(ready[1]);
  int refused = -1;
  ASSERT_EQ(read(ready[0], &refused, sizeof refused), static_cast<ssize_t>(sizeof refused));
  close(ready[0]);
  EXPECT_EQ(refused, kSilent - 4 - 64)
      << "of one uid's silent connections, four are answered, 64 wait, the rest are refused";
  const auto start = std::chrono::steady_clock::now();
  expect_bystander_served((*d)->unix_uri() + "?transport=shm", 21, kFillSource,
                          /*shared_memory=*/true);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  kill(child, SIGKILL);
  EXPECT_EQ(waitpid(child, nullptr, 0), child);
}

// Clients of one user that start together (a job's 32 ranks) all get their
// shared-memory channels: the connections past the four handshakes a uid
// has at once wait their turn rather than being refused.
TEST(ShmHandshakes, ThirtyTwoClientsOfOneUserStartingAtOnceAllGetSharedMemory) {
  auto d = Daemon::start({"--no-workers"});
  ASSERT_TRUE(d.ok()) << d.status();
  constexpr int kClients = 32;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) {
    auto c = Client::connect((*d)->unix_uri() + "?transport=shm", absl::StrCat("rank-", i));
    ASSERT_TRUE(c.ok()) << c.status();
    clients.push_back(*std::move(c));
  }
  // Every client asks for its channel at the same moment.
  std::atomic<int> arrived{0};
  std::vector<absl::Status> results(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      arrived.fetch_add(1);
      while (arrived.load() < kClients) std::this_thread::yield();
      auto q = clients[i]->create_queue();
      if (!q.ok()) {
        results[i] = q.status();
      } else if (!(*q)->shared_memory()) {
        results[i] = absl::InternalError("the queue is not on shared memory");
      } else {
        results[i] = (*q)->ping();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kClients; ++i)
    EXPECT_TRUE(results[i].ok()) << "rank " << i << ": " << results[i];
}

}  // namespace
}  // namespace kad::testing
