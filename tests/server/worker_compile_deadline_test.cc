// A kernel is compiled by a compile worker of its own (DESIGN §8). One whose
// driver build passes the compile deadline is stopped by kad at once: the
// compile is DEADLINE_EXCEEDED naming the kernel and the limit, the compile
// worker counts as stopped at a deadline (not as a crash), and the session's
// own worker, which never ran the compiler, goes on serving it.
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "core/launch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/worker/isolated_device.h"
#include "tests/support/pocl.h"

namespace kad {
namespace {

using server::worker::IsolatedDevice;
using server::worker::WorkerPool;
using ::testing::HasSubstr;

// A kernel no cache holds: PoCL must build it (about a second on 2 cores).
std::string fresh_source(int salt) {
  return absl::StrCat("kernel void fresh(KAD_CONTEXT, global int* out, int k) {\n",
                      "  if (kad_active()) out[kad_global_linear()] = k * ", salt, " + ", getpid(),
                      " - ", getpid(), ";\n}\n");
}

TEST(WorkerCompileDeadline, ABuildPastTheDeadlineStopsItsCompileWorkerAndIsNotACrash) {
  WorkerPool pool(
      {.command = {KAD_DAEMON_PATH, {}}, .compile_timeout = absl::Milliseconds(20), .spares = 0});
  IsolatedDevice device(testing::pocl_device(), pool);
  const int salt = static_cast<int>((getpid() ^ time(nullptr)) & 0xffff);
  auto module = Module::create(ModuleFormat::kOpenClC, fresh_source(salt));
  ASSERT_TRUE(module.ok()) << module.status();
  auto kernel = Kernel::create(*module, {"fresh",
                                         std::nullopt,
                                         std::nullopt,
                                         {ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kI32)},
                                         ""});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  auto queue = device.create_queue();
  auto buffer = device.allocate(64 * sizeof(int32_t));
  ASSERT_TRUE(queue.ok() && buffer.ok()) << queue.status() << buffer.status();
  const pid_t first = device.worker_pid();
  ASSERT_GT(first, 0);

  KernelCache cache;
  const NdRange range{Dims{64}};
  const KernelArg args[] = {KernelArg::of_buffer(**buffer), KernelArg::of_scalar<int32_t>(3)};
  absl::StatusOr<LaunchResult> r = launch(**kernel, **queue, cache, {&range, nullptr, args});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("compiling kernel `fresh` on opencl:pocl:0 took longer than 20ms: kad "
                        "stopped its compile worker (pid "));
  EXPECT_EQ(device.worker_pid(), first);
  EXPECT_EQ(pool.stats().compile_workers, 1u);
  EXPECT_EQ(pool.stats().timed_out, 1u);
  EXPECT_EQ(pool.stats().crashed, 0u);

  // The session goes on in the same worker: its buffer reads, and a queue
  // is made there.
  std::vector<int32_t> zeros(64, -1);
  ASSERT_TRUE((*queue)->read_buffer(**buffer, 0, std::as_writable_bytes(std::span(zeros))).ok());
  EXPECT_EQ(zeros, std::vector<int32_t>(64, 0));
  auto another = device.create_queue();
  ASSERT_TRUE(another.ok()) << another.status();
  EXPECT_EQ(device.worker_pid(), first);
}

}  // namespace
}  // namespace kad
