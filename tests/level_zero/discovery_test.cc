// Discovery with the real loader: on a machine without an Intel GPU (CI, the
// build machines) it finds nothing and says why in exactly one log line.
#include "backends/level_zero/level_zero_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kad::level_zero {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string joined(const BackendDiscovery& d) {
  std::string out;
  for (const std::string& line : d.log) out += line + "\n";
  return out;
}

TEST(LevelZeroDiscovery, MissingLoaderGivesOneLineSayingTheLibraryIsMissing) {
  BackendDiscovery d = discover({.loader = "libze_loader_kad_test_absent.so.1"});
  EXPECT_TRUE(d.devices.empty());
  ASSERT_EQ(d.log.size(), 1u) << joined(d);
  EXPECT_THAT(d.log[0], StartsWith("level_zero: loader unavailable: cannot load "
                                   "libze_loader_kad_test_absent.so.1: "));
  EXPECT_THAT(d.log[0], HasSubstr("No such file"));
}

TEST(LevelZeroDiscovery, WithoutADeviceGivesNoDeviceAndExactlyOneLineSayingWhy) {
  BackendDiscovery d = discover();
  if (!d.devices.empty()) GTEST_SKIP() << "this machine has a Level Zero device:\n" << joined(d);
  ASSERT_EQ(d.log.size(), 1u) << joined(d);
  EXPECT_THAT(d.log[0], StartsWith("level_zero: "));
  const bool says_why = d.log[0].find("loader unavailable") != std::string::npos ||
                        d.log[0].find("no driver") != std::string::npos ||
                        d.log[0].find("no device") != std::string::npos;
  EXPECT_TRUE(says_why) << d.log[0];
}

TEST(LevelZeroDiscovery, InstalledLoaderWithoutDriverSaysNoDriverIsInstalled) {
  // What the Debian loader (libze1 1.8) answers when no driver library is
  // installed: zeInit fails with ZE_RESULT_ERROR_UNINITIALIZED.
  if (!load_loader().ok()) GTEST_SKIP() << "no Level Zero loader here";
  BackendDiscovery d = discover();
  if (!d.devices.empty()) GTEST_SKIP() << "this machine has a Level Zero device:\n" << joined(d);
  ASSERT_EQ(d.log.size(), 1u) << joined(d);
  if (d.log[0].find("ZE_RESULT_ERROR_UNINITIALIZED") == std::string::npos) {
    GTEST_SKIP() << "a driver is installed here but lists no device: " << d.log[0];
  }
  EXPECT_EQ(d.log[0],
            "level_zero: no driver: libze_loader.so.1 loaded, but zeInit returned "
            "ZE_RESULT_ERROR_UNINITIALIZED (0x78000001): no Level Zero driver (such as Intel's "
            "compute runtime, libze_intel_gpu.so.1) is installed, or none found a device");
}

TEST(LevelZeroDiscovery, AskingTwiceGivesTheSameAnswer) {
  // zeInit may be called again (kad's tests and a restarted registry do).
  BackendDiscovery first = discover();
  BackendDiscovery second = discover();
  EXPECT_EQ(first.devices.size(), second.devices.size());
  EXPECT_EQ(first.log, second.log);
}

}  // namespace
}  // namespace kad::level_zero
