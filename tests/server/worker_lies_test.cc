// DESIGN §8: kad trusts nothing a worker answers. A compile worker runs a
// client's module through the driver's compiler, which that module may take
// over; its reply is checked before kad keeps it. A reply kad cannot use is
// an error naming what is wrong, and it is not stored in the code cache,
// where it would fail that kernel for every session and across restarts.
#include <unistd.h>

#include <memory>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/kernel_lowering.h"
#include "gtest/gtest.h"
#include "server/worker/isolated_device.h"
#include "server/worker/program_build.h"
#include "server/worker/wide_builds.h"
#include "server/worker/worker_pool.h"
#include "tests/support/pocl.h"

namespace kad::server::worker {
namespace {

// A kernel `entry` of a module no code cache has seen, compiled from source
// on `pocl`.
absl::StatusOr<testing::SourceCompile> unseen_kernel(Device& pocl, const std::string& entry) {
  std::random_device random;
  const uint64_t nonce = (uint64_t{random()} << 32) | random();
  return testing::source_compile(
      pocl,
      absl::StrCat("// nonce ", nonce, "\nkernel void ", entry,
                   "(KAD_CONTEXT, global int* out) {\n"
                   "  if (kad_active()) out[kad_global_linear()] = 1;\n}\n"),
      entry);
}

TEST(WorkerLies, ACompileReplyKadCannotUseIsAnErrorAndIsNotKeptForTheNextCompile) {
  if (!KernelLowering::shared().cache().enabled()) GTEST_SKIP() << "the code cache is off";
  Device& pocl = testing::pocl_device();
  absl::StatusOr<testing::SourceCompile> compile = unseen_kernel(pocl, "lied_about");
  ASSERT_TRUE(compile.ok()) << compile.status();
  const CompileRequest request = compile->request();

  {
    WorkerPool liars({.command = {KAD_LYING_WORKER_PATH, {}}, .spares = 0});
    IsolatedDevice device(pocl, liars);
    absl::StatusOr<std::unique_ptr<CompiledKernel>> lied = device.compile(request);
    ASSERT_FALSE(lied.ok());
    EXPECT_EQ(lied.status().code(), absl::StatusCode::kInternal) << lied.status();
    EXPECT_EQ(lied.status().message(),
              "the worker reported impossible kernel limits: 0 work-items per group, multiple "
              "of 1");
    EXPECT_EQ(liars.stats().compile_workers, 1u);
  }

  // An honest compile worker then builds it: nothing of the lie was kept.
  WorkerPool honest({.command = {KAD_DAEMON_PATH, {}}, .spares = 0});
  IsolatedDevice device(pocl, honest);
  absl::StatusOr<std::unique_ptr<CompiledKernel>> built = device.compile(request);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(honest.stats().compile_workers, 1u) << "the lie was found in the code cache";
}

// The same for a kernel's build for the wide device (wide_builds.h), which
// kad hands to every session's worker that asks: a lie is no build (the
// kernel stays on one core), and an honest compile worker builds it next.
TEST(WorkerLies, AWideBuildReplyKadCannotUseIsNoBuildAndIsNotKept) {
  if (!KernelLowering::shared().cache().enabled()) GTEST_SKIP() << "the code cache is off";
  Device& pocl = testing::pocl_device();
  absl::StatusOr<testing::SourceCompile> compile = unseen_kernel(pocl, "lied_about_wide");
  ASSERT_TRUE(compile.ok()) << compile.status();
  const CompileRequest request = compile->request();
  auto message = std::make_shared<const std::string>(to_message(request).SerializeAsString());
  const std::string key = program_binary_key(pocl.info(), kWideBuildVariant, request);
  // The build, once done (30 s at most).
  auto built = [&](WorkerPool& pool) {
    std::shared_ptr<const WideBuilds::Build> build =
        pool.wide_builds().want(pocl, key, "lied_about_wide", message);
    for (int i = 0; i < 3000 && !build->done.load(); ++i) absl::SleepFor(absl::Milliseconds(10));
    EXPECT_TRUE(build->done.load());
    return build;
  };

  {
    WorkerPool liars({.command = {KAD_LYING_WORKER_PATH, {}}, .spares = 0});
    std::shared_ptr<const WideBuilds::Build> lie = built(liars);
    ASSERT_FALSE(lie->binary.ok());
    EXPECT_EQ(lie->binary.status().code(), absl::StatusCode::kInternal) << lie->binary.status();
    EXPECT_EQ(lie->binary.status().message(),
              "the worker reported impossible kernel limits: 0 work-items per group, multiple "
              "of 1");
    EXPECT_EQ(liars.wide_builds().stats().failed, 1u);
  }

  WorkerPool honest({.command = {KAD_DAEMON_PATH, {}}, .spares = 0});
  std::shared_ptr<const WideBuilds::Build> truth = built(honest);
  ASSERT_TRUE(truth->binary.ok()) << truth->binary.status();
  EXPECT_FALSE(truth->binary->empty());
  EXPECT_EQ(honest.wide_builds().stats().built, 1u) << "the lie was found in the code cache";
  EXPECT_EQ(honest.wide_builds().stats().from_cache, 0u);
}

}  // namespace
}  // namespace kad::server::worker
