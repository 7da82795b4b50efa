// DESIGN §8: kad trusts nothing a worker answers. A compile worker runs a
// client's module through the driver's compiler, which that module may take
// over; its reply is checked before kad keeps it. A reply kad cannot use is
// an error naming what is wrong, and it is not stored in the code cache,
// where it would fail that kernel for every session and across restarts.
#include <unistd.h>

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/kernel_lowering.h"
#include "gtest/gtest.h"
#include "server/worker/isolated_device.h"
#include "server/worker/worker_pool.h"
#include "tests/support/pocl.h"

namespace kad::server::worker {
namespace {

TEST(WorkerLies, ACompileReplyKadCannotUseIsAnErrorAndIsNotKeptForTheNextCompile) {
  if (!KernelLowering::shared().cache().enabled()) GTEST_SKIP() << "the code cache is off";
  Device& pocl = testing::pocl_device();
  // A module no code cache has seen.
  std::random_device random;
  const uint64_t nonce = (uint64_t{random()} << 32) | random();
  absl::StatusOr<testing::SourceCompile> compile = testing::source_compile(
      pocl,
      absl::StrCat("// nonce ", nonce,
                   "\nkernel void lied_about(KAD_CONTEXT, global int* out) {\n"
                   "  if (kad_active()) out[kad_global_linear()] = 1;\n}\n"),
      "lied_about");
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

}  // namespace
}  // namespace kad::server::worker
