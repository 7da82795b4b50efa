// The loader's function table, loaded from the real libraries.
#include "backends/level_zero/level_zero_api.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kad::level_zero {
namespace {

using ::testing::HasSubstr;

TEST(LevelZeroApi, InstalledLoaderExportsEveryFunctionKadCalls) {
  absl::StatusOr<LevelZeroApi> api = load_loader();
  if (!api.ok()) GTEST_SKIP() << "no Level Zero loader here (libze1): " << api.status();
  EXPECT_EQ(api->origin, "libze_loader.so.1");
#define KAD_EXPECT_LOADED(name) EXPECT_NE(api->name, nullptr) << #name;
  KAD_LEVEL_ZERO_FUNCTIONS(KAD_EXPECT_LOADED)
#undef KAD_EXPECT_LOADED
}

TEST(LevelZeroApi, MissingLibraryIsNotFoundWithTheLoadersReason) {
  absl::StatusOr<LevelZeroApi> api = load_loader("libze_loader_kad_test_absent.so.1");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(api.status().message(), HasSubstr("cannot load libze_loader_kad_test_absent.so.1: "));
  EXPECT_THAT(api.status().message(), HasSubstr("No such file"));
}

TEST(LevelZeroApi, LibraryWithoutTheFunctionsNamesTheFirstMissingSymbol) {
  // A real library that is not a Level Zero loader.
  absl::StatusOr<LevelZeroApi> api = load_loader("libm.so.6");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(api.status().message(), "libm.so.6 has no symbol zeInit");
}

}  // namespace
}  // namespace kad::level_zero
