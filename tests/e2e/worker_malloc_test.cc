// --worker-malloc: a real kad's workers keep glibc's malloc by default, and
// preload tcmalloc when told to where the machine has it
// (worker::tcmalloc_library); read from each worker's own mappings.
#include <dirent.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "server/worker/worker_process.h"
#include "tests/e2e/e2e.h"

namespace kad::testing {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// kad's workers (its children started with --worker-fd), waiting up to 10 s
// for at least one (the spare kad keeps ready).
std::vector<pid_t> workers_of(pid_t kad) {
  std::vector<pid_t> found;
  for (int tries = 0; tries < 100 && found.empty(); ++tries) {
    if (tries > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    DIR* proc = opendir("/proc");
    while (dirent* e = proc != nullptr ? readdir(proc) : nullptr) {
      int pid = 0;
      if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
      const std::string status = read_file("/proc/" + std::to_string(pid) + "/status");
      if (status.find("\nPPid:\t" + std::to_string(kad) + "\n") == std::string::npos) continue;
      if (read_file("/proc/" + std::to_string(pid) + "/cmdline").find("--worker-fd") !=
          std::string::npos)
        found.push_back(pid);
    }
    if (proc != nullptr) closedir(proc);
  }
  return found;
}

TEST(WorkerMalloc, WorkersPreloadTcmallocWhenToldToWhereTheMachineHasIt) {
  if (server::worker::tcmalloc_library().empty())
    GTEST_SKIP()
        << "libtcmalloc_minimal.so.4 is not installed (deploy/install-deps.sh installs it)";
  auto daemon = Daemon::start({"--worker-malloc", "tcmalloc"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::vector<pid_t> workers = workers_of((*daemon)->pid());
  ASSERT_FALSE(workers.empty()) << (*daemon)->log();
  for (pid_t w : workers) {
    EXPECT_THAT(read_file("/proc/" + std::to_string(w) + "/maps"),
                ::testing::HasSubstr("libtcmalloc_minimal.so.4"))
        << "worker " << w;
  }
  EXPECT_THAT((*daemon)->log(), ::testing::HasSubstr("workers allocate with tcmalloc"));
}

TEST(WorkerMalloc, WorkersKeepGlibcsMallocByDefault) {
  auto daemon = Daemon::start();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::vector<pid_t> workers = workers_of((*daemon)->pid());
  ASSERT_FALSE(workers.empty()) << (*daemon)->log();
  for (pid_t w : workers) {
    EXPECT_THAT(read_file("/proc/" + std::to_string(w) + "/maps"),
                ::testing::Not(::testing::HasSubstr("tcmalloc")))
        << "worker " << w;
  }
}

TEST(WorkerMalloc, AnAllocatorKadDoesNotKnowIsRefusedNamingIt) {
  auto daemon = Daemon::start({"--worker-malloc", "jemalloc"});
  ASSERT_FALSE(daemon.ok());
  EXPECT_THAT(std::string(daemon.status().message()), ::testing::HasSubstr("jemalloc"));
}

}  // namespace
}  // namespace kad::testing
