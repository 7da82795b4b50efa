#include "tests/support/worker_process.h"

#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kad::testing {

std::string worker_dir_of(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"));
  std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (absl::string_view arg : absl::StrSplit(cmdline, '\0')) {
    if (absl::ConsumePrefix(&arg, "--worker-dir=")) return std::string(arg);
  }
  return {};
}

}  // namespace kad::testing
