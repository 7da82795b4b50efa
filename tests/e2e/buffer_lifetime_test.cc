// Device memory outlives the launches that use it (DESIGN §8: nothing crashes,
// nothing is lost): a session may free a buffer that submitted launches still
// read; the engine finishes them first, because not every backend's free waits
// (Level Zero's and HSA's do not). Device memory as on a GPU: no zero-copy.
#include <cstdint>
#include <span>
#include <vector>

#include "backends/registry.h"
#include "gtest/gtest.h"
#include "server/engine.h"

namespace kad::server {
namespace {

constexpr char kAccumulate[] = R"(
kernel void accumulate(KAD_CONTEXT, global long* sum, const global long* restrict in) {
  if (kad_active()) sum[kad_global_linear()] += in[kad_global_linear()];
}
)";

TEST(BufferLifetime, FreeingDeviceMemoryThatQueuedLaunchesReadFinishesThemFirst) {
  EngineLimits limits;
  limits.zero_copy = false;
  Engine engine(discover_devices(), limits);
  auto session = engine.open_session("lifetime", "test");
  ASSERT_TRUE(session.ok()) << session.status();
  Session& s = **session;
  auto queue = engine.create_queue(s, "");
  ASSERT_TRUE(queue.ok()) << queue.status();
  constexpr size_t kItems = 4096;
  std::vector<int64_t> sum(kItems, 0), in(kItems);
  for (size_t i = 0; i < kItems; ++i) in[i] = static_cast<int64_t>(i);
  auto sum_buffer = engine.allocate_buffer(s, "", kItems * sizeof(int64_t));
  auto in_buffer = engine.allocate_buffer(s, "", kItems * sizeof(int64_t));
  ASSERT_TRUE(sum_buffer.ok() && in_buffer.ok());
  EXPECT_FALSE(in_buffer->host_visible);
  ASSERT_TRUE(
      engine.write_buffer(s, *queue, sum_buffer->handle, 0, std::as_bytes(std::span(sum))).ok());
  ASSERT_TRUE(
      engine.write_buffer(s, *queue, in_buffer->handle, 0, std::as_bytes(std::span(in))).ok());
  auto module = engine.load_module(s, ModuleFormat::kOpenClC, kAccumulate);
  ASSERT_TRUE(module.ok()) << module.status();
  KernelSignature sig{
      "accumulate", std::nullopt, std::nullopt, {ArgSpec::buffer(), ArgSpec::const_buffer()}, ""};
  auto kernel = engine.get_kernel(s, module->handle, sig);
  ASSERT_TRUE(kernel.ok()) << kernel.status();

  KernelArg args[2];
  args[0].kind = ArgKind::kBuffer;
  args[0].bits = sum_buffer->handle;
  args[1].kind = ArgKind::kConstBuffer;
  args[1].bits = in_buffer->handle;
  const NdRange range(Dims{static_cast<int64_t>(kItems)});
  EventId last = 0;
  for (int k = 0; k < 50; ++k) {
    absl::StatusOr<LaunchResult> r = engine.launch(s, {*queue, *kernel, &range, nullptr, args});
    ASSERT_TRUE(r.ok()) << r.status();
    last = r->event;
  }
  ASSERT_TRUE(engine.free_buffer(s, in_buffer->handle).ok());  // 50 launches not waited for
  ASSERT_TRUE(engine.wait(s, *queue, last).ok());
  ASSERT_TRUE(
      engine.read_buffer(s, *queue, sum_buffer->handle, 0, std::as_writable_bytes(std::span(sum)))
          .ok());
  for (size_t i = 0; i < kItems; ++i) ASSERT_EQ(sum[i], 50 * static_cast<int64_t>(i)) << i;
  // Later launches naming the freed buffer are refused, not run.
  absl::StatusOr<LaunchResult> after = engine.launch(s, {*queue, *kernel, &range, nullptr, args});
  EXPECT_EQ(after.status().code(), absl::StatusCode::kNotFound) << after.status();
}

}  // namespace
}  // namespace kad::server
