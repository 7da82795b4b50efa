// DESIGN §7 on the daemon's gRPC side: KadService::run_command — the very
// dispatch Submit runs for every command it reads off the stream — decodes a
// warm launch and its wait, resolves the handles and launches through the
// engine without allocating. The commands arrive as kad.v1 messages; the reply
// is reused and cleared as Submit reuses its reply slots. Nothing of gRPC runs
// here, so every allocation on this thread outside driver calls is kad's.
// The shared-memory dispatch and the client transports: shm_alloc_test.cc.
// Figures (allocations per launch of the whole daemon, gRPC included) are the
// benchmarks' (bench/), not this suite's.
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/registry.h"
#include "gtest/gtest.h"
#include "kad/v1/kad.pb.h"
#include "server/engine.h"
#include "server/kad_service.h"
#include "tests/support/alloc_counter.h"
#include "tests/support/test_kernels.h"

namespace kad::server {
namespace {

using testing::AllocCounter;

constexpr int64_t kElements = 4096;
constexpr int kLaunches = 500;

class RunCommandAllocations : public ::testing::Test {
 protected:
  void SetUp() override {
    auto session = engine_.open_session("alloc", "test");
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = *std::move(session);
    auto queue = engine_.create_queue(*session_, "");
    ASSERT_TRUE(queue.ok()) << queue.status();
    queue_ = *queue;
    auto buffer = engine_.allocate_buffer(*session_, "", kElements * sizeof(int32_t));
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    buffer_ = buffer->handle;
    auto module =
        engine_.load_module(*session_, ModuleFormat::kOpenClC, kad::testing::kAffineKernel);
    ASSERT_TRUE(module.ok()) << module.status();
    KernelSignature sig{"affine",
                        std::nullopt,
                        std::nullopt,
                        {ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kI32),
                         ArgSpec::scalar_of(ScalarType::kI32)},
                        ""};
    auto kernel = engine_.get_kernel(*session_, module->handle, sig);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    kernel_ = *kernel;
  }

  // A launch command as a client's transport puts it on the stream:
  // out[i] = i * 3 + k over kElements items, with the workgroup given or not.
  v1::QueueCommand launch_command(bool workgroup) const {
    v1::QueueCommand command;
    command.set_queue(queue_);
    v1::Launch* l = command.mutable_launch();
    l->set_kernel(kernel_);
    l->mutable_ndrange()->add_extents(kElements);
    if (workgroup) l->mutable_workgroup()->add_sizes(64);
    l->add_args()->set_buffer(buffer_);
    for (int i = 0; i < 2; ++i) {
      v1::KernelArg* a = l->add_args();
      a->set_scalar_bits(3);
      a->set_scalar(v1::SCALAR_TYPE_I32);
    }
    return command;
  }

  // Sets the launch's `k` in place (the message keeps its storage).
  static void set_k(v1::QueueCommand& command, int32_t k) {
    command.mutable_launch()->mutable_args(2)->set_scalar_bits(static_cast<uint32_t>(k));
  }

  // One command through the real dispatch, into the reused reply, readied
  // first as Submit readies its reply slot before each command.
  int32_t run(const v1::QueueCommand& command) {
    KadService::reset_reply(&reply_);
    service_.run_command(*session_, queue_, command, &reply_);
    return reply_.code();
  }

  // What the buffer holds after the last launch wrote `k`.
  void expect_written_by(int32_t k) {
    std::vector<int32_t> host(kElements);
    ASSERT_TRUE(
        engine_.read_buffer(*session_, queue_, buffer_, 0, std::as_writable_bytes(std::span(host)))
            .ok());
    for (int64_t i = 0; i < kElements; ++i)
      ASSERT_EQ(host[static_cast<size_t>(i)], static_cast<int32_t>(i) * 3 + k) << "element " << i;
  }

  Engine engine_{discover_devices(), EngineLimits{}};
  Authenticator no_tokens_;  // authentication off, as on a daemon without --tokens
  KadService service_{engine_, no_tokens_};
  std::shared_ptr<Session> session_;
  uint64_t queue_ = 0, buffer_ = 0, kernel_ = 0;
  v1::QueueReply reply_;
};

TEST_F(RunCommandAllocations, WarmLaunchAndWaitAllocateNothing) {
  for (bool workgroup : {false, true}) {
    SCOPED_TRACE(workgroup ? "workgroup given" : "workgroup tuned");
    v1::QueueCommand launch = launch_command(workgroup);
    v1::QueueCommand wait;
    wait.set_queue(queue_);
    wait.mutable_wait()->set_event(1);
    for (int32_t k = 0; k < 3; ++k) {  // compiles, then warms every message's storage
      set_k(launch, k);
      ASSERT_EQ(run(launch), 0) << reply_.message();
      wait.mutable_wait()->set_event(reply_.event());
      ASSERT_EQ(run(wait), 0) << reply_.message();
    }
    AllocCounter counter;
    for (int32_t k = 0; k < kLaunches; ++k) {
      set_k(launch, k);
      if (run(launch) != 0) break;
      wait.mutable_wait()->set_event(reply_.event());
      if (run(wait) != 0) break;
    }
    const uint64_t kad_allocs = counter.counts().kad_allocs;
    ASSERT_EQ(reply_.code(), 0) << reply_.message();
    EXPECT_EQ(kad_allocs, 0u) << "over " << kLaunches << " launches and waits";
    expect_written_by(kLaunches - 1);
  }
}

TEST_F(RunCommandAllocations, PipelinedWarmLaunchesAllocateNothing) {
  v1::QueueCommand launch = launch_command(false);
  v1::QueueCommand wait_all;  // event 0: everything submitted so far
  wait_all.set_queue(queue_);
  wait_all.mutable_wait();
  for (int32_t k = 0; k < 3; ++k) {
    set_k(launch, k);
    ASSERT_EQ(run(launch), 0) << reply_.message();
  }
  ASSERT_EQ(run(wait_all), 0) << reply_.message();
  constexpr int kPipelined = 200;
  AllocCounter counter;
  for (int32_t k = 0; k < kPipelined; ++k) {
    set_k(launch, k);
    if (run(launch) != 0) break;
  }
  if (reply_.code() == 0) run(wait_all);
  const uint64_t kad_allocs = counter.counts().kad_allocs;
  ASSERT_EQ(reply_.code(), 0) << reply_.message();
  EXPECT_EQ(kad_allocs, 0u) << "over " << kPipelined << " launches and one wait";
  expect_written_by(kPipelined - 1);
}

TEST_F(RunCommandAllocations, WarmRunsAllocateNothing) {
  v1::QueueCommand run_command;
  run_command.set_queue(queue_);
  *run_command.mutable_run() = launch_command(false).launch();
  const auto set_run_k = [&](int32_t k) {
    run_command.mutable_run()->mutable_args(2)->set_scalar_bits(static_cast<uint32_t>(k));
  };
  for (int32_t k = 0; k < 3; ++k) {
    set_run_k(k);
    ASSERT_EQ(run(run_command), 0) << reply_.message();
  }
  AllocCounter counter;
  for (int32_t k = 0; k < kLaunches; ++k) {
    set_run_k(k);
    if (run(run_command) != 0) break;
  }
  const uint64_t kad_allocs = counter.counts().kad_allocs;
  ASSERT_EQ(reply_.code(), 0) << reply_.message();
  EXPECT_NE(reply_.event(), 0u);
  EXPECT_EQ(kad_allocs, 0u) << "over " << kLaunches << " runs";
  expect_written_by(kLaunches - 1);
}

TEST_F(RunCommandAllocations, WarmBatchesAllocateNothing) {
  v1::QueueCommand batch;
  batch.set_queue(queue_);
  constexpr int kPerBatch = 64;
  for (int i = 0; i < kPerBatch; ++i)
    *batch.mutable_batch()->add_launches() = launch_command(false).launch();
  v1::QueueCommand wait_all;
  wait_all.set_queue(queue_);
  wait_all.mutable_wait();
  const auto set_batch_k = [&](int32_t k) {
    for (v1::Launch& l : *batch.mutable_batch()->mutable_launches())
      l.mutable_args(2)->set_scalar_bits(static_cast<uint32_t>(k));
  };
  set_batch_k(0);
  ASSERT_EQ(run(batch), 0) << reply_.message();
  ASSERT_EQ(run(wait_all), 0) << reply_.message();
  constexpr int kBatches = 5;
  AllocCounter counter;
  for (int32_t k = 1; k <= kBatches; ++k) {
    set_batch_k(k);
    if (run(batch) != 0) break;
  }
  if (reply_.code() == 0) run(wait_all);
  const uint64_t kad_allocs = counter.counts().kad_allocs;
  ASSERT_EQ(reply_.code(), 0) << reply_.message();
  EXPECT_EQ(kad_allocs, 0u) << "over " << kBatches << " batches of " << kPerBatch
                            << " launches and one wait";
  expect_written_by(kBatches);
}

TEST_F(RunCommandAllocations, TheCounterSeesTheDispatchAllocate) {
  // Not blind: a refused launch builds its message on this very path.
  v1::QueueCommand launch = launch_command(false);
  launch.mutable_launch()->set_kernel(kernel_ + 1000);
  ASSERT_EQ(run(launch_command(false)), 0) << reply_.message();  // warm, as above
  AllocCounter counter;
  EXPECT_NE(run(launch), 0);
  EXPECT_GT(counter.counts().kad_allocs, 0u);
  EXPECT_FALSE(reply_.message().empty());
}

}  // namespace
}  // namespace kad::server
