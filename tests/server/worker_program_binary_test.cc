// DESIGN §8: compiled code is shared between workers as program binaries,
// built by a compile worker that runs nothing else. A kernel is compiled
// once per key for every session; another session's worker, and a daemon
// started again (the code cache), load the binary instead of compiling.
#include <unistd.h>

#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/kernel_lowering.h"
#include "core/launch.h"
#include "gtest/gtest.h"
#include "server/worker/isolated_device.h"
#include "tests/support/pocl.h"
#include "tests/support/worker_process.h"

namespace kad {
namespace {

using server::worker::IsolatedDevice;
using server::worker::WorkerPool;
namespace fs = std::filesystem;

constexpr int64_t kElements = 1000;

// Launches `kernel` on a new queue and buffer of `device`, and checks every
// value it wrote.
void launch_and_check(IsolatedDevice& device, Kernel& kernel, KernelCache& cache, int32_t salt) {
  auto queue = device.create_queue();
  auto buffer = device.allocate(kElements * sizeof(int32_t));
  ASSERT_TRUE(queue.ok() && buffer.ok()) << queue.status() << buffer.status();
  const NdRange range{Dims{kElements}};
  const KernelArg args[] = {KernelArg::of_buffer(**buffer), KernelArg::of_scalar<int32_t>(5)};
  absl::StatusOr<LaunchResult> r = launch(kernel, **queue, cache, {&range, nullptr, args});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE((*queue)->wait(r->event).ok());
  std::vector<int32_t> host(kElements);
  ASSERT_TRUE((*queue)->read_buffer(**buffer, 0, std::as_writable_bytes(std::span(host))).ok());
  for (int64_t i = 0; i < kElements; ++i)
    ASSERT_EQ(host[static_cast<size_t>(i)], static_cast<int32_t>(i) * salt + 5) << "at " << i;
}

// A module no code cache has seen, whatever runs came before and left
// their kernels there: a random nonce makes its digest new (the salt alone,
// 15 bits, repeated across runs now and then).
std::unique_ptr<Kernel> salted_kernel(int32_t salt, const std::string& entry) {
  std::random_device random;
  const uint64_t nonce = (uint64_t{random()} << 32) | random();
  auto module = Module::create(
      ModuleFormat::kOpenClC,
      absl::StrCat("// nonce ", nonce, "\nkernel void ", entry,
                   "(KAD_CONTEXT, global int* out, int k) {\n",
                   "  if (kad_active()) out[kad_global_linear()] = (int)kad_global_linear() * ",
                   salt, " + k;\n}\n"));
  if (!module.ok()) return nullptr;
  auto kernel = Kernel::create(*module, {entry,
                                         std::nullopt,
                                         std::nullopt,
                                         {ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kI32)},
                                         ""});
  return kernel.ok() ? *std::move(kernel) : nullptr;
}

TEST(WorkerProgramBinaries, AKernelIsBuiltOnceAndEverySessionsWorkerLoadsItsBinary) {
  WorkerPool pool({.command = {KAD_DAEMON_PATH, {}}, .spares = 0});
  // A kernel no cache holds, so that the first launch must build it.
  const int32_t salt = static_cast<int32_t>((getpid() ^ time(nullptr)) & 0xffff) | 1;
  std::unique_ptr<Kernel> kernel = salted_kernel(salt, "salted_once");
  ASSERT_NE(kernel, nullptr);
  const CodeCache::Stats before = KernelLowering::shared().cache().stats();

  KernelCache cache;  // the daemon's, shared by its sessions
  IsolatedDevice first(testing::pocl_device(), pool);
  launch_and_check(first, *kernel, cache, salt);
  EXPECT_EQ(pool.stats().compile_workers, 1u);
  const pid_t first_worker = first.worker_pid();
  ASSERT_GT(first_worker, 0);

  // Another session: its own worker, the same compiled kernel.
  IsolatedDevice second(testing::pocl_device(), pool);
  launch_and_check(second, *kernel, cache, salt);
  EXPECT_NE(second.worker_pid(), first_worker);
  EXPECT_EQ(pool.stats().compile_workers, 1u) << "the second session compiled the kernel again";
  // The session workers loaded what the compile worker built; none of them
  // compiled the source again.
  EXPECT_EQ(pool.stats().binary_loads, 2u);
  EXPECT_EQ(pool.stats().source_loads, 0u) << "a session's worker compiled the kernel itself";

  // A daemon started again (an empty in-memory cache) finds the binary in
  // the code cache, where the first build stored it.
  const CodeCache::Stats after_build = KernelLowering::shared().cache().stats();
  if (!KernelLowering::shared().cache().enabled()) GTEST_SKIP() << "the code cache is off";
  EXPECT_EQ(after_build.stores - before.stores, 2u) << "the lowered SPIR and the program binary";
  KernelCache restarted;
  IsolatedDevice third(testing::pocl_device(), pool);
  launch_and_check(third, *kernel, restarted, salt);
  EXPECT_EQ(pool.stats().compile_workers, 1u) << "a restarted daemon compiled the kernel again";
  EXPECT_EQ(pool.stats().binary_loads, 3u) << "the third worker did not load the stored binary";
  EXPECT_EQ(pool.stats().source_loads, 0u);
  EXPECT_GT(KernelLowering::shared().cache().stats().hits, after_build.hits);
  EXPECT_EQ(pool.stats().crashed + pool.stats().timed_out, 0u);
}

// The work-group functions PoCL built in a worker's own driver cache for
// kernel `entry`: "0-0-0" is the generic one, others are per size.
std::set<std::string> workgroup_functions(pid_t worker, const std::string& entry) {
  std::set<std::string> found;
  const std::string dir = testing::worker_folder_inside(worker);
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(dir) / "driver-cache", ec)) {
    if (e.is_directory() && e.path().parent_path().filename() == entry)
      found.insert(e.path().filename().string());
  }
  return found;
}

TEST(WorkerProgramBinaries, WorkersRunTheGenericWorkGroupFunctionUnlessToldToSpecialize) {
  const int32_t salt = static_cast<int32_t>((getpid() ^ time(nullptr)) & 0xffff) | 1;
  std::unique_ptr<Kernel> kernel = salted_kernel(salt, "salted_generic");
  ASSERT_NE(kernel, nullptr);
  KernelCache cache;
  {
    WorkerPool pool({.command = {KAD_DAEMON_PATH, {}}, .spares = 0});
    IsolatedDevice device(testing::pocl_device(), pool);
    launch_and_check(device, *kernel, cache, salt);
    EXPECT_EQ(workgroup_functions(device.worker_pid(), "salted_generic"),
              std::set<std::string>{"0-0-0"});
  }
  WorkerPool pool({.command = {KAD_DAEMON_PATH, {"--worker-specialize"}}, .spares = 0});
  IsolatedDevice device(testing::pocl_device(), pool);
  launch_and_check(device, *kernel, cache, salt);
  const std::set<std::string> built = workgroup_functions(device.worker_pid(), "salted_generic");
  EXPECT_GE(built.size(), 2u) << "only the generic work-group function was built";
  EXPECT_TRUE(built.contains("0-0-0"));
}

// A spare loads the device's recent kernels before anyone takes it, by
// messages on its socket while it already sleeps on its launch ring: they
// count as messages sent, as every other does, or the session that takes
// it would find each request waiting for the worker's periodic look at its
// socket (kad now ends a worker whose count is off, so that costs the
// session its worker here).
TEST(WorkerProgramBinaries, ASpareLoadsTheRecentKernelsAheadAndServesTheSessionThatTakesIt) {
  WorkerPool pool({.command = {KAD_DAEMON_PATH, {}}, .spares = 1});
  pool.keep_ready(testing::pocl_device().info().id);
  const int32_t salt = static_cast<int32_t>((getpid() ^ time(nullptr)) & 0xffff) | 3;
  std::unique_ptr<Kernel> kernel = salted_kernel(salt, "salted_preloaded");
  ASSERT_NE(kernel, nullptr);
  KernelCache cache;
  IsolatedDevice first(testing::pocl_device(), pool);
  launch_and_check(first, *kernel, cache, salt);
  // The first session's worker loaded the program binary (and the spare
  // started when it took one may have loaded it too by now).
  ASSERT_GE(pool.stats().binary_loads, 1u);
  // The spare started before that launch knows nothing of its kernel: taken
  // away, the one started after it loads the kernel the first session ran.
  // (Which of the two is ready now is a race: take whichever it is.)
  absl::StatusOr<std::unique_ptr<server::worker::WorkerProcess>> stale =
      pool.take(testing::pocl_device().info().id);
  ASSERT_TRUE(stale.ok()) << stale.status();
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (pool.stats().ready_preloaded == 0 && absl::Now() < give_up)
    absl::SleepFor(absl::Milliseconds(20));
  ASSERT_EQ(pool.stats().ready, 1u);
  ASSERT_EQ(pool.stats().ready_preloaded, 1u) << "the spare did not load the recent kernel";

  const uint64_t loads = pool.stats().binary_loads;
  IsolatedDevice second(testing::pocl_device(), pool);
  launch_and_check(second, *kernel, cache, salt);
  launch_and_check(second, *kernel, cache, salt);
  // One load more: the spare started when `second` took the preloaded one
  // loads the kernel too; the session's worker had it already.
  while (pool.stats().ready_preloaded == 0 && absl::Now() < give_up)
    absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(pool.stats().binary_loads, loads + 1) << "the session's worker loaded the kernel again";
  EXPECT_EQ(pool.stats().crashed + pool.stats().timed_out, 0u);
}

// DESIGN §8: a session's worker runs its client's code natively, so it may
// hold no other client's code. A spare loaded with one owner's recent
// kernels stays for that owner; another's session gets a worker that
// loaded nothing ahead, and loads the kernel it launches itself.
TEST(WorkerProgramBinaries, ASpareLoadedWithOneOwnersKernelsGoesToNoOtherOwner) {
  WorkerPool pool({.command = {KAD_DAEMON_PATH, {}}, .spares = 1});
  const std::string device_id = testing::pocl_device().info().id;
  pool.keep_ready(device_id);
  static int32_t round = 0;  // a kernel no cache holds, in every repetition
  const int32_t salt =
      static_cast<int32_t>((getpid() ^ time(nullptr) ^ (++round << 8)) & 0xffff) | 5;
  std::unique_ptr<Kernel> kernel = salted_kernel(salt, "salted_owned");
  ASSERT_NE(kernel, nullptr);
  KernelCache cache;
  IsolatedDevice alice(testing::pocl_device(), pool, {}, "alice/1000");
  launch_and_check(alice, *kernel, cache, salt);
  // A spare started before alice's launch loaded nothing: taken away by
  // bob, the next one loads alice's kernel. One started after it holds her
  // kernel already, and bob's take does not get it.
  absl::StatusOr<std::unique_ptr<server::worker::WorkerProcess>> stale =
      pool.take(device_id, "bob/1001");
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_TRUE((*stale)->preloaded.empty()) << "bob's take got a spare holding alice's kernel";
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (pool.stats().ready_preloaded == 0 && absl::Now() < give_up)
    absl::SleepFor(absl::Milliseconds(20));
  ASSERT_EQ(pool.stats().ready, 1u);
  ASSERT_EQ(pool.stats().ready_preloaded, 1u) << "no spare loaded alice's kernel";

  // Bob's session, even launching the same kernel, gets a worker of its
  // own that held nothing, and loads the kernel there.
  const uint64_t loads = pool.stats().binary_loads;
  IsolatedDevice bob(testing::pocl_device(), pool, {}, "bob/1001");
  launch_and_check(bob, *kernel, cache, salt);
  EXPECT_EQ(pool.stats().binary_loads, loads + 1) << "bob's worker came with alice's kernel in it";
  EXPECT_EQ(pool.stats().ready_preloaded, 1u) << "alice's spare was not kept for alice";

  // Alice's next session has the spare that holds her kernel.
  absl::StatusOr<std::unique_ptr<server::worker::WorkerProcess>> alices =
      pool.take(device_id, "alice/1000");
  ASSERT_TRUE(alices.ok()) << alices.status();
  EXPECT_EQ((*alices)->preloaded.size(), 1u) << "alice's session did not get her spare";
  EXPECT_EQ((*alices)->preloaded_for, "alice/1000");
  EXPECT_EQ(pool.stats().crashed + pool.stats().timed_out, 0u);
}

}  // namespace
}  // namespace kad
