// workers_root() (server/worker/worker_folders.h) in a process of its own
// (this binary spawns no worker before it): a root that cannot be made now
// is tried again at the next call, not given up for the process's life.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "server/worker/worker_folders.h"

namespace kad {
namespace {

namespace fs = std::filesystem;

TEST(WorkersRoot, ARootThatCannotBeMadeIsTriedAgainAtTheNextCall) {
  char base[] = "/tmp/kad-root-test-XXXXXX";
  ASSERT_NE(mkdtemp(base), nullptr);
  const fs::path tmp = fs::path(base) / "tmp";  // not there yet
  const char* old = std::getenv("TMPDIR");
  const std::string old_tmpdir = old != nullptr ? old : "";
  setenv("TMPDIR", tmp.c_str(), 1);

  absl::StatusOr<std::string> first = server::worker::workers_root();
  EXPECT_FALSE(first.ok()) << "a root under " << tmp << ", which is not there";
  EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();

  fs::create_directory(tmp);
  absl::StatusOr<std::string> second = server::worker::workers_root();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(fs::path(*second).parent_path(), tmp);
  EXPECT_EQ(fs::path(*second).filename().string().rfind("kad-workers-", 0), 0u) << *second;
  struct stat st {};
  ASSERT_EQ(stat(second->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0711u) << "workers of other uids pass through";
  // Made once.
  absl::StatusOr<std::string> third = server::worker::workers_root();
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(*third, *second);

  if (old_tmpdir.empty()) {
    unsetenv("TMPDIR");
  } else {
    setenv("TMPDIR", old_tmpdir.c_str(), 1);
  }
  // The root goes with `base` (its removal at this process's exit then
  // finds nothing).
  std::error_code ec;
  fs::remove_all(base, ec);
}

}  // namespace
}  // namespace kad
