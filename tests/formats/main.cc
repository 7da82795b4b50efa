// A private PoCL kernel cache and a private kad code cache for this process,
// set before PoCL starts: the IR read back is this run's, and every IR module
// is lowered here rather than found on disk from an earlier run.
#include <stdlib.h>

#include <filesystem>

#include "gtest/gtest.h"

namespace kad::testing {
const char* g_pocl_cache = nullptr;
}  // namespace kad::testing

int main(int argc, char** argv) {
  static char pocl[] = "/tmp/kad-formats-pocl-XXXXXX";
  static char code[] = "/tmp/kad-formats-code-XXXXXX";
  if (mkdtemp(pocl) == nullptr || mkdtemp(code) == nullptr) return 2;
  setenv("POCL_CACHE_DIR", pocl, 1);
  setenv("KAD_CACHE_DIR", code, 1);
  kad::testing::g_pocl_cache = pocl;
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  if (getenv("KAD_KEEP_TEST_CACHES") == nullptr) {  // kept for a look at what was built
    std::error_code ec;
    std::filesystem::remove_all(pocl, ec);
    std::filesystem::remove_all(code, ec);
  }
  return result;
}
