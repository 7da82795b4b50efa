#include "server/worker/worker_folders.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "spdlog/spdlog.h"

namespace kad::server::worker {
namespace {

constexpr char kRootPrefix[] = "kad-workers-";
// A root while it is made: not yet locked, so not a sweeper's to take.
constexpr char kStagingPrefix[] = "kad-starting-";

struct Root {
  std::string path;
  // At exit the workers' folders are gone (each with its worker), and the
  // root goes too; if one is left, the next kad removes it all.
  ~Root() {
    if (!path.empty()) rmdir(path.c_str());
  }
};

absl::StatusOr<std::string> make_root() {
  std::error_code ec;
  const std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrFormat("no folder for temporary files: %s", ec.message()));
  }
  if (const int removed = remove_stale_workers_roots(tmp.string()); removed > 0) {
    spdlog::info("removed the workers' folders of {} kad(s) that were killed, under {}", removed,
                 tmp.string());
  }
  std::string staging = (tmp / absl::StrCat(kStagingPrefix, "XXXXXX")).string();
  if (mkdtemp(staging.data()) == nullptr) {
    return absl::UnavailableError(
        absl::StrFormat("cannot make a folder %s: %s", staging, std::strerror(errno)));
  }
  // Held for the process's life (never closed): its lock says this kad
  // lives. Close-on-exec: no worker inherits it.
  const int fd = open(staging.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  // Workers of other uids pass through to their own folders, and see no
  // other's name.
  if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0 || fchmod(fd, 0711) != 0) {
    const int error = errno;
    if (fd >= 0) close(fd);
    std::filesystem::remove(staging, ec);
    return absl::UnavailableError(
        absl::StrFormat("cannot lock the folder %s: %s", staging, std::strerror(error)));
  }
  const std::string suffix = staging.substr(staging.size() - 6);
  const std::string root = (tmp / absl::StrCat(kRootPrefix, suffix)).string();
  if (rename(staging.c_str(), root.c_str()) != 0) {
    const int error = errno;
    close(fd);
    std::filesystem::remove(staging, ec);
    return absl::UnavailableError(
        absl::StrFormat("cannot name the folder %s: %s", root, std::strerror(error)));
  }
  return root;
}

}  // namespace

int remove_stale_workers_roots(const std::string& tmp) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(tmp, ec)) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, kRootPrefix)) continue;
    // Only a real folder (never a link someone put there), of this user,
    // and only if no kad holds its lock.
    const int fd = open(entry.path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && flock(fd, LOCK_EX | LOCK_NB) == 0) {
      std::error_code removing;
      std::filesystem::remove_all(entry.path(), removing);
      if (!removing) ++removed;
    }
    close(fd);
  }
  return removed;
}

absl::StatusOr<std::string> workers_root() {
  // Made once; a failure (a full disk, say) is tried again at the next
  // worker's start rather than kept for the process's life.
  static absl::Mutex mu(absl::kConstInit);
  static Root root;  // removed at exit
  absl::MutexLock lock(&mu);
  if (root.path.empty()) {
    absl::StatusOr<std::string> made = make_root();
    if (!made.ok()) return made.status();
    root.path = *std::move(made);
  }
  return root.path;
}

}  // namespace kad::server::worker
