#include "tests/support/worker_process.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kad::testing {

std::string read_proc_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char chunk[4096];
  for (;;) {
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.clear();
      break;
    }
    if (n == 0) break;
    out.append(chunk, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

std::string worker_dir_of(pid_t pid) {
  const std::string cmdline = read_proc_file(absl::StrCat("/proc/", pid, "/cmdline"));
  for (absl::string_view arg : absl::StrSplit(cmdline, '\0')) {
    if (absl::ConsumePrefix(&arg, "--worker-dir=")) return std::string(arg);
  }
  return {};
}

std::string worker_folder_inside(pid_t pid) {
  const std::string dir = worker_dir_of(pid);
  return dir.empty() ? "" : absl::StrCat("/proc/", pid, "/root", dir);
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_proc_file(e.path() / "stat");
    if (stat.empty()) continue;  // the process ended
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string state;
    pid_t ppid = 0;
    fields >> state >> ppid;
    if (ppid == parent) out.push_back(std::stoi(name));
  }
  return out;
}

}  // namespace kad::testing
