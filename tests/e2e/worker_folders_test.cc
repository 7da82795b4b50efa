// Workers' folders live under one folder per kad, locked while that kad
// runs (server/worker/worker_folders.h). A kad that is killed cannot remove
// them; the next kad to start removes them, and leaves alone what is not
// its own: a live kad's folder, another user's, a link.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/e2e/e2e.h"

namespace kad {
namespace {

namespace fs = std::filesystem;

// The workers' roots under `tmp`.
std::vector<fs::path> roots_in(const fs::path& tmp) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(tmp, ec)) {
    if (e.path().filename().string().rfind("kad-workers-", 0) == 0 && !e.is_symlink())
      out.push_back(e.path());
  }
  return out;
}

// Waits up to 20 s for `done()`.
template <typename Done>
bool eventually(Done done) {
  for (int i = 0; i < 400; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

class WorkerFolders : public ::testing::Test {
 protected:
  void SetUp() override {
    // A folder for temporary files of this test's kads alone (they inherit
    // TMPDIR), which workers of other uids may pass through.
    char dir[] = "/tmp/kad-folders-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    tmp_ = dir;
    ASSERT_EQ(chmod(dir, 0711), 0);
    const char* old = std::getenv("TMPDIR");
    old_tmpdir_ = old != nullptr ? old : "";
    setenv("TMPDIR", dir, 1);
  }
  void TearDown() override {
    if (old_tmpdir_.empty()) {
      unsetenv("TMPDIR");
    } else {
      setenv("TMPDIR", old_tmpdir_.c_str(), 1);
    }
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  fs::path tmp_;
  std::string old_tmpdir_;
};

TEST_F(WorkerFolders, AKilledKadsWorkerFoldersAreRemovedByTheNextKadAndNothingElseIs) {
  // What the next kad must leave alone: a folder of that name of another
  // user, and a link of that name to a folder with a file in it.
  const fs::path others = tmp_ / "kad-workers-others";
  fs::create_directory(others);
  ASSERT_EQ(chown(others.c_str(), 65534, 65534), 0);
  const fs::path target = tmp_ / "target";
  fs::create_directory(target);
  std::ofstream(target / "keep") << "keep";
  fs::create_directory_symlink(target, tmp_ / "kad-workers-link");

  auto first = testing::Daemon::start();
  ASSERT_TRUE(first.ok()) << first.status();
  // Its spare worker has a folder under its root.
  fs::path root;
  ASSERT_TRUE(eventually([&] {
    for (const fs::path& r : roots_in(tmp_)) {
      std::error_code ec;
      if (r != others && !fs::is_empty(r, ec)) root = r;
    }
    return !root.empty();
  })) << "no workers' folder under "
      << tmp_;
  ASSERT_EQ((*first)->stop(SIGKILL), -SIGKILL);
  ASSERT_TRUE(fs::exists(root)) << "a killed kad removed nothing";

  auto second = testing::Daemon::start();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(eventually([&] { return !fs::exists(root); })) << root << " is still there";
  fs::path second_root;
  EXPECT_TRUE(eventually([&] {
    for (const fs::path& r : roots_in(tmp_)) {
      if (r != others) second_root = r;
    }
    return !second_root.empty();
  }));
  EXPECT_TRUE(fs::exists(others)) << "another user's folder was removed";
  EXPECT_TRUE(fs::exists(target / "keep")) << "a link was followed";
  EXPECT_TRUE(fs::is_symlink(tmp_ / "kad-workers-link"));

  // A third kad leaves the second's (live) root alone.
  auto third = testing::Daemon::start();
  ASSERT_TRUE(third.ok()) << third.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(fs::exists(second_root)) << "a live kad's folder was removed";
  // A kad that ends as it should leaves no folder behind.
  EXPECT_EQ((*third)->stop(SIGTERM), 0);
  EXPECT_EQ((*second)->stop(SIGTERM), 0);
  for (const fs::path& r : roots_in(tmp_))
    EXPECT_EQ(r, others) << "left behind by a kad that ended as it should";
}

}  // namespace
}  // namespace kad
