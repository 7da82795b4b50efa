// DESIGN §8: a worker runs client kernels as native code, so a kernel that
// takes its worker over runs whatever it likes there. These tests check what
// it can then reach. The first runs the worker's own confinement
// (confine_worker) in a child of the test and tries, as native code, each way
// past the walls; the second starts real workers of kad's executable and
// checks that PoCL still builds and runs kernels behind them.
#include "server/worker/worker_confinement.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "backends/opencl/opencl_backend.h"
#include "core/kernel_lowering.h"
#include "core/launch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/worker/isolated_device.h"
#include "tests/support/pocl.h"
#include "tests/support/worker_process.h"

namespace kad {
namespace {

namespace fs = std::filesystem;
using server::worker::describe_walls;
using server::worker::IsolatedDevice;
using server::worker::kAllWalls;
using server::worker::kWallProcessLimit;
using server::worker::WorkerPool;

// errno of a call that failed, 0 when it succeeded.
int outcome(long result) { return result < 0 ? errno : 0; }

int try_open(const std::string& path, int flags) {
  const int fd = open(path.c_str(), flags | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  close(fd);
  return 0;
}

// What each attempt of a confined process gave: name -> errno (0: it worked).
std::map<std::string, int> attempts_behind_the_walls(const std::string& worker_dir,
                                                     const std::string& host_file) {
  const std::string shared_driver_cache = opencl::pocl_cache_folder();
  std::error_code ec;
  fs::create_directories(shared_driver_cache, ec);  // so that a refusal is EACCES, not ENOENT
  int report[2];
  if (pipe(report) != 0) return {};
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child == 0) {
    close(report[0]);
    std::ostringstream out;
    absl::StatusOr<server::worker::Confinement> walls =
        server::worker::confine_worker(server::worker::worker_sandbox(worker_dir));
    out << "confined " << (walls.ok() ? 0 : 1) << "\n";
    const std::string p = std::to_string(parent);
    out << "read_etc_passwd " << try_open("/etc/passwd", O_RDONLY) << "\n";
    out << "read_a_host_file " << try_open(host_file, O_RDONLY) << "\n";
    out << "create_in_tmp "
        << try_open(absl::StrCat("/tmp/kad-escape-", getpid()), O_CREAT | O_WRONLY) << "\n";
    const std::string code_cache = KernelLowering::shared().cache().folder();
    out << "plant_in_code_cache "
        << try_open(absl::StrCat(code_cache, "/planted-", getpid(), ".kadc"), O_CREAT | O_WRONLY)
        << "\n";
    out << "list_code_cache " << outcome(open(code_cache.c_str(), O_RDONLY | O_DIRECTORY)) << "\n";
    // PoCL's own cache, where the daemon (--no-workers) keeps built programs.
    out << "plant_in_shared_driver_cache "
        << try_open(absl::StrCat(shared_driver_cache, "/planted-", getpid(), ".so"),
                    O_CREAT | O_WRONLY)
        << "\n";
    out << "create_in_own_folder " << try_open(worker_dir + "/scratch", O_CREAT | O_WRONLY) << "\n";
    out << "read_daemon_environ " << try_open(absl::StrCat("/proc/", p, "/environ"), O_RDONLY)
        << "\n";
    out << "read_daemon_memory " << try_open(absl::StrCat("/proc/", p, "/mem"), O_RDONLY) << "\n";
    out << "socket_inet " << outcome(socket(AF_INET, SOCK_STREAM, 0)) << "\n";
    out << "socket_unix " << outcome(socket(AF_UNIX, SOCK_STREAM, 0)) << "\n";
    out << "signal_daemon " << outcome(kill(parent, 0)) << "\n";
    out << "signal_daemon_thread " << outcome(syscall(SYS_tgkill, parent, parent, 0)) << "\n";
    // The pid's upper 32 bits are not the kernel's: the low ones name kad.
    out << "signal_daemon_wide_pid "
        << outcome(syscall(SYS_kill, (long{1} << 32) | static_cast<long>(parent), 0)) << "\n";
    out << "signal_every_process " << outcome(kill(-1, 0)) << "\n";
    out << "signal_daemon_group " << outcome(kill(-getpgid(parent), 0)) << "\n";
    out << "signal_by_thread_id " << outcome(syscall(SYS_tkill, parent, 0)) << "\n";
    out << "signal_itself " << outcome(kill(getpid(), 0)) << "\n";
    out << "ptrace_daemon " << outcome(ptrace(PTRACE_ATTACH, parent, nullptr, nullptr)) << "\n";
    out << "new_user_namespace " << outcome(unshare(CLONE_NEWUSER)) << "\n";
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[2]{};
    syscall(SYS_capget, &header, caps);
    out << "capabilities " << (caps[0].effective | caps[0].permitted | caps[1].effective) << "\n";
    // A compiler the worker starts still runs (and is confined as well).
    const pid_t tool = fork();
    if (tool == 0) {
      execl("/bin/true", "true", nullptr);
      _exit(127);
    }
    int status = 0;
    waitpid(tool, &status, 0);
    out << "run_a_tool " << (WIFEXITED(status) ? WEXITSTATUS(status) : 128) << "\n";
    const std::string text = out.str();
    (void)!write(report[1], text.data(), text.size());
    _exit(0);
  }
  close(report[1]);
  std::string text;
  char chunk[512];
  for (ssize_t n; (n = read(report[0], chunk, sizeof chunk)) > 0;) text.append(chunk, n);
  close(report[0]);
  waitpid(child, nullptr, 0);
  std::map<std::string, int> results;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const std::vector<std::string> parts = absl::StrSplit(line, ' ');
    if (parts.size() == 2) results[parts[0]] = std::stoi(parts[1]);
  }
  return results;
}

TEST(WorkerConfinement, ATakenOverWorkerReachesNoFileSocketProcessOrPrivilege) {
  const fs::path base = fs::path(::testing::TempDir()) / absl::StrCat("kad-walls-", getpid());
  fs::create_directories(base / "worker");
  const std::string host_file = (base / "secret").string();
  std::ofstream(host_file) << "not for workers\n";

  const std::map<std::string, int> got =
      attempts_behind_the_walls((base / "worker").string(), host_file);
  fs::remove_all(base);
  ASSERT_EQ(got.count("confined"), 1u) << "the confined child reported nothing";
  ASSERT_EQ(got.at("confined"), 0);

  const SandboxReach reach = sandbox_reach();
  if (reach.files) {
    EXPECT_EQ(got.at("read_etc_passwd"), EACCES);
    EXPECT_EQ(got.at("read_a_host_file"), EACCES);
    EXPECT_EQ(got.at("create_in_tmp"), EACCES);
    EXPECT_EQ(got.at("read_daemon_environ"), EACCES);
    EXPECT_EQ(got.at("read_daemon_memory"), EACCES);
    // kad's code cache holds every tenant's code: a worker neither writes
    // nor reads it (the daemon sends what it lowered with each compile).
    EXPECT_EQ(got.at("plant_in_code_cache"), EACCES);
    EXPECT_EQ(got.at("list_code_cache"), EACCES);
    EXPECT_EQ(got.at("plant_in_shared_driver_cache"), EACCES);
  }
  // Refused by seccomp on any kernel (and by Landlock too from ABI 6).
  EXPECT_EQ(got.at("signal_daemon"), EPERM);
  EXPECT_EQ(got.at("signal_daemon_thread"), EPERM);
  EXPECT_EQ(got.at("signal_daemon_wide_pid"), EPERM);
  EXPECT_EQ(got.at("signal_every_process"), EPERM);
  EXPECT_EQ(got.at("signal_daemon_group"), EPERM);
  EXPECT_EQ(got.at("signal_by_thread_id"), EPERM);
  EXPECT_EQ(got.at("signal_itself"), 0);
  EXPECT_EQ(got.at("create_in_own_folder"), 0);
  EXPECT_EQ(got.at("socket_inet"), EPERM);
  EXPECT_EQ(got.at("socket_unix"), EPERM);
  EXPECT_EQ(got.at("ptrace_daemon"), EPERM);
  EXPECT_EQ(got.at("new_user_namespace"), EPERM);
  EXPECT_EQ(got.at("capabilities"), 0);
  EXPECT_EQ(got.at("run_a_tool"), 0);
}

// On a kernel without Landlock's signal scope (before Linux 6.12, Debian 12's
// 6.1 among them) seccomp alone keeps a taken-over worker from signalling
// kad: checked here with seccomp as the only wall.
TEST(WorkerConfinement, SystemCallsAloneRefuseEverySignalToTheDaemon) {
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child == 0) {
    const bool before = kill(parent, 0) == 0;
    if (!server::worker::confine_system_calls().ok()) _exit(10);
    if (!before) _exit(11);
    if (outcome(kill(parent, 0)) != EPERM) _exit(12);
    if (outcome(syscall(SYS_tgkill, parent, parent, 0)) != EPERM) _exit(13);
    if (outcome(syscall(SYS_kill, (long{1} << 32) | static_cast<long>(parent), 0)) != EPERM)
      _exit(14);
    if (outcome(kill(-1, 0)) != EPERM) _exit(15);
    if (outcome(syscall(SYS_tkill, parent, 0)) != EPERM) _exit(16);
    if (outcome(syscall(SYS_rt_sigqueueinfo, parent, 0, nullptr)) != EPERM) _exit(17);
    if (outcome(kill(-getpgid(parent), 0)) != EPERM) _exit(18);
    if (outcome(kill(getpid(), 0)) != 0) _exit(19);
    // A compiler it started, ended by its process group, as toolchain.cc does.
    const pid_t tool = fork();
    if (tool == 0) {
      setpgid(0, 0);
      pause();
      _exit(0);
    }
    setpgid(tool, tool);
    if (outcome(kill(-tool, SIGKILL)) != 0) _exit(20);
    waitpid(tool, nullptr, 0);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  // 10: no filter; 11: could not signal before; 12..18: a signal to the
  // daemon went through (in the order above); 19: it cannot signal itself;
  // 20: nor a group of its own children.
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(WorkerConfinement, ConfiningAProcessWithThreadsIsRefused) {
  // Landlock and seccomp hold per thread: a thread started before would be
  // left outside, so the worker must confine itself before the driver starts any.
  // The thread lives until confine_worker has answered, however long that takes.
  absl::Notification answered;
  std::thread t([&answered] { answered.WaitForNotification(); });
  absl::StatusOr<server::worker::Confinement> walls =
      server::worker::confine_worker(server::worker::worker_sandbox(""));
  answered.Notify();
  t.join();
  ASSERT_FALSE(walls.ok());
  EXPECT_EQ(walls.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(walls.status().message(), "it has 2")) << walls.status();
}

std::map<std::string, std::string> proc_status(pid_t pid) {
  std::map<std::string, std::string> fields;
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    fields[line.substr(0, colon)] = std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return fields;
}

// "Max processes  256  256  processes": the soft and hard limits in
// /proc/PID/limits, the rest of the line dropped.
std::string max_processes_of(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/limits"));
  for (std::string line; std::getline(in, line);) {
    if (!absl::StartsWith(line, "Max processes")) continue;
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    return words.size() >= 4 ? absl::StrCat(words[2], " ", words[3]) : line;
  }
  return "";
}

TEST(WorkerConfinement, KadsWorkersBuildAndRunKernelsBehindEveryWall) {
  // Under root, as a kad started as root runs them: each as a uid of its
  // own, held to its process limit.
  WorkerPool pool({.command = {.executable = KAD_DAEMON_PATH,
                               .args = {},
                               .max_processes = 256,
                               .uids = geteuid() == 0 ? server::worker::WorkerUids::create(
                                                            server::worker::kDefaultWorkerUidBase)
                                                      : nullptr},
                   .spares = 0});
  auto device = std::make_unique<IsolatedDevice>(testing::pocl_device(), pool);
  // A kernel no cache has seen: PoCL builds it inside the walls of a
  // compile worker (clang in process, then `ld`), and the session's worker
  // loads its program binary.
  const int32_t salt = static_cast<int32_t>(getpid() ^ time(nullptr)) & 0xffff;
  auto module = Module::create(
      ModuleFormat::kOpenClC,
      absl::StrCat("kernel void salted(KAD_CONTEXT, global int* out, int k) {\n"
                   "  if (kad_active()) out[kad_global_linear()] = (int)kad_global_linear() * ",
                   salt, " + k;\n}\n"));
  ASSERT_TRUE(module.ok()) << module.status();
  auto kernel = Kernel::create(*module, {"salted",
                                         std::nullopt,
                                         std::nullopt,
                                         {ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kI32)},
                                         ""});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  constexpr int64_t kElements = 4096;
  auto queue = device->create_queue();
  auto buffer = device->allocate(kElements * sizeof(int32_t));
  ASSERT_TRUE(queue.ok() && buffer.ok()) << queue.status() << buffer.status();
  KernelCache cache;
  const NdRange range{Dims{kElements}};
  const KernelArg args[] = {KernelArg::of_buffer(**buffer), KernelArg::of_scalar<int32_t>(7)};
  absl::StatusOr<LaunchResult> r = launch(**kernel, **queue, cache, {&range, nullptr, args});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE((*queue)->wait(r->event).ok());
  std::vector<int32_t> host(kElements);
  ASSERT_TRUE((*queue)->read_buffer(**buffer, 0, std::as_writable_bytes(std::span(host))).ok());
  for (int64_t i = 0; i < kElements; ++i)
    ASSERT_EQ(host[static_cast<size_t>(i)], static_cast<int32_t>(i) * salt + 7) << "at " << i;

  const pid_t pid = device->worker_pid();
  ASSERT_GT(pid, 0);
  const std::map<std::string, std::string> status = proc_status(pid);
  EXPECT_EQ(status.at("NoNewPrivs"), "1");
  EXPECT_EQ(status.at("Seccomp"), "2");  // a filter
  EXPECT_EQ(status.at("CapEff"), "0000000000000000");
  EXPECT_EQ(status.at("CapPrm"), "0000000000000000");
  if (geteuid() == 0) {
    EXPECT_EQ(status.at("CapBnd"), "0000000000000000");
  }
  if (sandbox_reach().signals_and_abstract_sockets) {
    EXPECT_EQ(pool.stats().walls, describe_walls(kAllWalls, sandbox_reach().landlock_abi));
  }
  // Its limit, whether Linux holds its user to it or not (namespaced_spawn_test).
  if (status.at("NSpid").find('\t') != std::string::npos) {  // in a PID namespace of its own
    EXPECT_EQ(max_processes_of(pid), "256 256");
  }

  EXPECT_EQ(pool.stats().compile_workers, 1u);

  // Its own folder lives as long as it does, and holds its driver's cache
  // (in a tmpfs of its own, seen through its mount namespace).
  const std::string dir = testing::worker_dir_of(pid);
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(fs::is_directory(dir));
  const std::string inside = testing::worker_folder_inside(pid);
  EXPECT_TRUE(fs::is_directory(fs::path(inside) / "driver-cache" / "pocl")) << inside;
  queue->reset();
  buffer->reset();
  device.reset();
  EXPECT_FALSE(fs::exists(dir)) << dir << " outlived its worker";
}

// A worker kad could not start in namespaces of its own (posix_spawn sets
// no limits) bounds its own memory from its flag, before anything a client
// sends reaches it, and says so in its walls; with 0 it has no bound and
// says that too.
TEST(WorkerConfinement, AWorkerStartedWithoutNamespacesBoundsItsOwnMemory) {
  for (const uint64_t bound : {uint64_t{1} << 30, uint64_t{0}}) {
    SCOPED_TRACE(bound);
    char folder[] = "/tmp/kad-worker-test-XXXXXX";
    ASSERT_NE(mkdtemp(folder), nullptr);
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    const pid_t worker = fork();
    if (worker == 0) {
      dup2(fds[1], 3);
      const std::string dir = absl::StrCat("--worker-dir=", folder);
      const std::string memory = absl::StrCat("--worker-max-memory=", bound);
      execl(KAD_DAEMON_PATH, KAD_DAEMON_PATH, "--worker-fd=3", "--worker-device=opencl:pocl:0",
            dir.c_str(), memory.c_str(), nullptr);
      _exit(127);
    }
    close(fds[1]);
    server::worker::Connection connection(fds[0]);
    server::worker::MessageReader reader(connection);
    server::worker::Header header;
    std::span<const std::byte> payload;
    ASSERT_TRUE(
        reader.next(&header, &payload, nullptr, absl::Now() + absl::Seconds(60), 1 << 16).ok());
    ASSERT_EQ(header.op, static_cast<uint32_t>(server::worker::Op::kHello));
    server::worker::HelloRecord hello;
    ASSERT_GE(payload.size(), sizeof hello);
    std::memcpy(&hello, payload.data(), sizeof hello);
    EXPECT_EQ(hello.code, 0);
    EXPECT_EQ((hello.walls & server::worker::kWallMemoryLimit) != 0, bound > 0)
        << describe_walls(hello.walls, hello.landlock_abi);
    const std::string limits = testing::read_proc_file(absl::StrCat("/proc/", worker, "/limits"));
    const std::string expected =
        bound > 0 ? absl::StrCat(bound, " +", bound) : std::string("unlimited +unlimited");
    EXPECT_THAT(limits, ::testing::ContainsRegex("Max data size +" + expected + " ")) << limits;
    close(fds[0]);  // a worker whose daemon hung up ends
    int status = 0;
    ASSERT_EQ(waitpid(worker, &status, 0), worker);
    fs::remove_all(folder);
  }
}

}  // namespace
}  // namespace kad
