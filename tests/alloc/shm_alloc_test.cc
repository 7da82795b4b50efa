// DESIGN §7 through the client library's transports, with the daemon in this
// process (tests/support/in_process_daemon.h: its engine, gRPC service and
// shared-memory listener) and the client on this thread, reaching it over its
// real UNIX socket. Counted around exactly the warm launches:
//  - shared memory: the client's transport (this thread) and the daemon's
//    channel thread, which runs the real dispatch (ShmChannel: decode, engine
//    launch, completion) and is marked as a kad service thread, allocate
//    nothing outside driver calls;
//  - gRPC: gRPC's core and protobuf allocate on the calling thread too. The
//    core's share runs in a DriverScope (below); the rest is held to what a
//    bare Submit stream of the same kad.v1 messages, on the same daemon,
//    allocates outside the core: the client library's own code adds nothing.
// The daemon's gRPC dispatch (KadService::run_command): daemon_alloc_test.cc.
#include <dlfcn.h>
#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/driver_scope.h"
#include "gtest/gtest.h"
#include "kad/client.h"
#include "kad/v1/kad.grpc.pb.h"
#include "tests/support/alloc_counter.h"
#include "tests/support/in_process_daemon.h"
#include "tests/support/test_kernels.h"

// gRPC's core works on the calling thread as well as on its own: a stream's
// Write and Read start a batch of operations and then pluck its completion,
// and while plucking the thread polls the socket and runs whatever transport
// work is due — how much depends on timing. Both entry points (called from
// libgrpc++, so the definitions here take their place) run inside a
// DriverScope, and the allocation counter attributes what they allocate to
// the library, as it does for drivers. What stays on the thread's kad count —
// the client library's code, protobuf's encoding and decoding, gRPC's inline
// serialisation — is the same for every run of the same messages.
#define KAD_INSIDE_GRPC(ret, name, params, args)                                         \
  extern "C" ret name params {                                                           \
    static const auto real = reinterpret_cast<decltype(&name)>(dlsym(RTLD_NEXT, #name)); \
    kad::DriverScope grpc;                                                               \
    return real args;                                                                    \
  }
KAD_INSIDE_GRPC(grpc_call_error, grpc_call_start_batch,
                (grpc_call * call, const grpc_op* ops, size_t nops, void* tag, void* reserved),
                (call, ops, nops, tag, reserved))
KAD_INSIDE_GRPC(grpc_event, grpc_completion_queue_pluck,
                (grpc_completion_queue * cq, void* tag, gpr_timespec deadline, void* reserved),
                (cq, tag, deadline, reserved))
#undef KAD_INSIDE_GRPC

namespace kad {
namespace {

using client::Arg;
using client::ArgSpec;
using testing::AllocCounter;
using testing::AllocCounts;

constexpr int64_t kElements = 1024;
constexpr int kLaunches = 1000;

// Neither the client's transport (this thread) nor the daemon's service
// threads allocated; `service` says what the latter are doing.
void expect_nothing_allocated(const AllocCounts& c, const char* service) {
  EXPECT_EQ(c.kad_allocs, 0u) << "the client's shared-memory transport allocated";
  EXPECT_EQ(c.service_allocs, 0u) << service;
}

// One client of the in-process daemon with the affine kernel ready.
class TransportAllocations : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(daemon_.serving()); }

  // To the daemon of this fixture, or to `daemon`.
  void connect(const std::string& mode, testing::InProcessDaemon* daemon = nullptr) {
    auto c = Client::connect((daemon != nullptr ? *daemon : daemon_).uri(mode), "alloc");
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
    auto queue = client_->create_queue();
    ASSERT_TRUE(queue.ok()) << queue.status();
    queue_ = *std::move(queue);
    ASSERT_EQ(queue_->shared_memory(), mode == "shm");
    auto module = client_->load_module(kad::testing::kAffineKernel);
    ASSERT_TRUE(module.ok()) << module.status();
    auto kernel = client_->get_kernel(
        *module, {.entry = "affine",
                  .args = {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kI32),
                           ArgSpec::scalar_of(client::ScalarType::kI32)}});
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    kernel_ = *kernel;
    auto out = client_->allocate(kElements * sizeof(int32_t));
    ASSERT_TRUE(out.ok()) << out.status();
    out_ = *out;
    for (int32_t k = 0; k < 3; ++k) ASSERT_TRUE(launch_and_wait(k).ok());  // compiles
  }

  absl::Status launch_and_wait(int32_t k) {
    const Arg args[] = {Arg::buffer(out_), Arg::scalar<int32_t>(2), Arg::scalar<int32_t>(k)};
    absl::StatusOr<client::LaunchInfo> l = queue_->launch(kernel_, &range_, nullptr, args);
    if (!l.ok()) return l.status();
    return queue_->wait(l->event);
  }
  absl::Status run(int32_t k) {
    const Arg args[] = {Arg::buffer(out_), Arg::scalar<int32_t>(2), Arg::scalar<int32_t>(k)};
    return queue_->run(kernel_, &range_, nullptr, args).status();
  }
  absl::Status submit(int32_t k) {
    const Arg args[] = {Arg::buffer(out_), Arg::scalar<int32_t>(2), Arg::scalar<int32_t>(k)};
    return queue_->submit(kernel_, &range_, nullptr, args);
  }

  // What kLaunches pipelined launches and the wait for them allocated.
  AllocCounts count_pipeline() {
    AllocCounter counter;
    for (int32_t k = 0; k < kLaunches; ++k) EXPECT_TRUE(submit(k).ok()) << k;
    EXPECT_TRUE(queue_->wait().ok());
    return counter.counts();
  }

  // What the buffer holds after the last launch wrote `k`.
  void expect_written_by(int32_t k) {
    std::vector<int32_t> host(kElements);
    ASSERT_TRUE(queue_->read(out_, 0, std::as_writable_bytes(std::span(host))).ok());
    for (int64_t i = 0; i < kElements; ++i)
      ASSERT_EQ(host[static_cast<size_t>(i)], static_cast<int32_t>(i) * 2 + k) << "element " << i;
  }

  testing::InProcessDaemon daemon_{"transport-alloc"};
  std::unique_ptr<Client> client_;
  std::unique_ptr<client::Queue> queue_;
  client::Kernel kernel_;
  client::Buffer out_;
  const client::Dims range_{kElements};
};

TEST_F(TransportAllocations, ShmWarmLaunchAllocatesNothingInTheClientOrTheDaemonChannel) {
  connect("shm");
  AllocCounter sync_counter;
  for (int32_t k = 0; k < kLaunches; ++k) ASSERT_TRUE(launch_and_wait(k).ok());
  const AllocCounts sync = sync_counter.counts();
  expect_nothing_allocated(sync, "the daemon's shared-memory channel allocated");
  expect_written_by(kLaunches - 1);

  expect_nothing_allocated(count_pipeline(), "the daemon's shared-memory channel allocated");
  expect_written_by(kLaunches - 1);

  AllocCounter run_counter;
  for (int32_t k = 0; k < kLaunches; ++k) ASSERT_TRUE(run(k).ok());
  const AllocCounts ran = run_counter.counts();
  expect_nothing_allocated(ran, "the daemon's shared-memory channel allocated");
  expect_written_by(kLaunches - 1);
}

// The direct path (--shm-direct): once the client's repeated launches
// have its channel lent to its session's worker, kad's channel thread only
// looks at the loan now and then, and neither it nor the client allocates
// for a launch. (The worker's own count: ShmLentLaunchesAllocateNothingInTheWorker.)
TEST_F(TransportAllocations, ShmLentRunsAndPipelinesAllocateNothingInTheClientOrTheDaemonChannel) {
  testing::InProcessDaemon direct(
      "direct-alloc", /*workers=*/true, server::EngineLimits{}.device_queue_depth,
      server::SubmitStreams::kThreads, server::worker::kDefaultPoclWorkerDriver, "",
      /*shm_direct=*/true);
  ASSERT_TRUE(direct.serving());
  connect("shm", &direct);
  // kad's own pipelined launches each hold the queue's lent channels back
  // (ChannelLoans::hold), which must allocate nothing either. An answered
  // launch (which the worker never serves) before each wait keeps the
  // channel kad's: a loan is for a run of launches like one.
  const Arg args[] = {Arg::buffer(out_), Arg::scalar<int32_t>(2), Arg::scalar<int32_t>(0)};
  auto kads_batch = [&](int n) {
    for (int32_t k = 0; k < n; ++k) ASSERT_TRUE(submit(k).ok());
    ASSERT_TRUE(queue_->launch(kernel_, &range_, nullptr, args).ok());
    ASSERT_TRUE(queue_->wait().ok());
  };
  kads_batch(10);  // warm
  AllocCounter pipelined_counter;
  kads_batch(kLaunches);
  const AllocCounts pipelined = pipelined_counter.counts();
  expect_nothing_allocated(pipelined, "kad's channel thread allocated, holding loans back");

  for (int32_t k = 0; k < 10; ++k) ASSERT_TRUE(run(k).ok());  // lent after four
  // The worker serves as soon as it has the channel; kad's thread finishes
  // lending (and logs the loan, once) a moment later.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  AllocCounter counter;
  for (int32_t k = 0; k < kLaunches; ++k) ASSERT_TRUE(run(k).ok());
  const AllocCounts ran = counter.counts();
  expect_nothing_allocated(ran, "kad's channel thread allocated while the worker served");
  expect_written_by(kLaunches - 1);
  // Pipelined launches like them are the worker's too.
  expect_nothing_allocated(count_pipeline(),
                           "kad's channel thread allocated while the worker served a pipeline");
  expect_written_by(kLaunches - 1);
  queue_.reset();
  client_.reset();
}

// The worker's side of the direct path: once the session's worker has
// served 100 lent runs and 100 lent pipelined launches, 400 more of each
// leave its count (tests/support/counting_worker.cc: its serving thread and
// its queues' executors, reported every 10 ms) where it was.
TEST_F(TransportAllocations, ShmLentLaunchesAllocateNothingInTheWorker) {
  const std::string report = absl::StrCat(::testing::TempDir(), "kad-lent-allocs-", getpid());
  setenv("KAD_WORKER_ALLOC_REPORT", report.c_str(), 1);
  // Once the daemon below has gone, and its workers with it.
  struct RemoveReports {
    const std::string& prefix;
    ~RemoveReports() {
      for (const auto& e : std::filesystem::directory_iterator(::testing::TempDir()))
        if (absl::StartsWith(e.path().string(), prefix)) std::filesystem::remove(e.path());
    }
  } remove_reports{report};
  testing::InProcessDaemon direct(
      "direct-worker-alloc", /*workers=*/true, server::EngineLimits{}.device_queue_depth,
      server::SubmitStreams::kThreads, server::worker::kDefaultPoclWorkerDriver,
      KAD_COUNTING_WORKER_PATH, /*shm_direct=*/true);
  ASSERT_TRUE(direct.serving());
  connect("shm", &direct);
  auto lent_launches = [&] {
    absl::StatusOr<client::ServiceStatus> s = client_->status();
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->lent_launches : 0;
  };
  const uint64_t lent_before = lent_launches();
  auto lent_runs_and_pipeline = [&](int n) {
    for (int32_t k = 0; k < n; ++k) ASSERT_TRUE(run(k).ok()) << k;
    for (int32_t k = 0; k < n; ++k) ASSERT_TRUE(submit(k).ok()) << k;
    ASSERT_TRUE(queue_->wait().ok());
    expect_written_by(n - 1);
  };
  lent_runs_and_pipeline(100);  // lent after the fourth run
  // The session's worker: the one that maps the lent channel.
  pid_t worker = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::error_code error;
    if (std::filesystem::read_symlink(e.path() / "exe", error) != KAD_COUNTING_WORKER_PATH)
      continue;
    std::ifstream maps(e.path() / "maps");
    const std::string text((std::istreambuf_iterator<char>(maps)), {});
    if (text.find("kad-shm-channel") != std::string::npos)
      worker = std::stoi(e.path().filename().string());
  }
  ASSERT_GT(worker, 0) << "no worker maps the channel: it was not lent";
  // Its count once it stopped changing (what kad sends it meanwhile, as
  // kernels to preload, is not the launches').
  auto worker_allocs = [&] {
    uint64_t last = ~uint64_t{0};
    for (int i = 0; i < 100; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      uint64_t now = 0;
      std::ifstream(absl::StrCat(report, ".", worker)) >> now;
      if (now == last) return now;
      last = now;
    }
    ADD_FAILURE() << "worker " << worker << "'s count never settled";
    return last;
  };
  const uint64_t after_100 = worker_allocs();
  EXPECT_GT(after_100, 0u) << "the worker's count sees its set-up";
  lent_runs_and_pipeline(400);
  EXPECT_EQ(worker_allocs(), after_100) << "800 more lent launches allocated in the worker";
  // Every run after the fourth, and every pipelined launch: the worker's.
  EXPECT_EQ(lent_launches() - lent_before, 1000u - 4);
  queue_.reset();
  client_.reset();
}

TEST_F(TransportAllocations, ShmCountersSeeTheClientAndTheChannelAllocate) {
  // Not blind: a launch of a kernel the session lacks is refused by the
  // channel, which formats the message, and the client turns it into a status.
  connect("shm");
  const client::Kernel unknown{kernel_.handle + 1000};
  const Arg args[] = {Arg::buffer(out_), Arg::scalar<int32_t>(2), Arg::scalar<int32_t>(0)};
  AllocCounter counter;
  EXPECT_FALSE(queue_->launch(unknown, &range_, nullptr, args).ok());
  const AllocCounts c = counter.counts();
  EXPECT_GT(c.kad_allocs, 0u);
  EXPECT_GT(c.service_allocs, 0u);
}

// The same launches and waits as the client's gRPC transport sends, written
// on a Submit stream of our own: what gRPC and protobuf allocate on the
// calling thread for them, with no client-library code involved.
class BareSubmitStream {
 public:
  BareSubmitStream(const std::string& unix_uri, const std::string& session, uint64_t queue,
                   const client::Kernel& kernel, const client::Buffer& out)
      : stub_(v1::Kad::NewStub(grpc::CreateChannel(unix_uri, grpc::InsecureChannelCredentials()))) {
    context_.AddMetadata("kad-session", session);
    stream_ = stub_->Submit(&context_);
    launch_.set_queue(queue);
    v1::Launch* l = launch_.mutable_launch();
    l->set_kernel(kernel.handle);
    l->mutable_ndrange()->add_extents(kElements);
    l->add_args()->set_buffer(out.handle);
    for (int i = 0; i < 2; ++i) {
      v1::KernelArg* a = l->add_args();
      a->set_scalar_bits(2);
      a->set_scalar(v1::SCALAR_TYPE_I32);
    }
    wait_.set_queue(queue);
    wait_.mutable_wait();
  }
  ~BareSubmitStream() {
    stream_->WritesDone();
    stream_->Finish().ok();
  }

  bool launch_and_wait(int32_t k) {
    launch_.mutable_launch()->mutable_args(2)->set_scalar_bits(static_cast<uint32_t>(k));
    if (!roundtrip(launch_)) return false;
    wait_.mutable_wait()->set_event(reply_.event());
    return roundtrip(wait_);
  }
  bool run(int32_t k) {
    if (!run_.has_run()) *run_.mutable_run() = launch_.launch();
    run_.mutable_run()->mutable_args(2)->set_scalar_bits(static_cast<uint32_t>(k));
    run_.set_queue(launch_.queue());
    return roundtrip(run_);
  }

 private:
  bool roundtrip(v1::QueueCommand& command) {
    command.set_tag(next_tag_++);
    return stream_->Write(command) && stream_->Read(&reply_) && reply_.code() == 0 &&
           reply_.tag() == command.tag();
  }

  std::unique_ptr<v1::Kad::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::QueueCommand, v1::QueueReply>> stream_;
  v1::QueueCommand launch_, wait_, run_;
  v1::QueueReply reply_;
  uint64_t next_tag_ = 1;
};

TEST_F(TransportAllocations, GrpcWarmLaunchAllocatesNothingBeyondABareStream) {
  connect("grpc-unix");
  std::string unix_uri = daemon_.uri("grpc-unix");
  unix_uri.resize(unix_uri.find('?'));
  BareSubmitStream bare(unix_uri, client_->session_id(), queue_->handle(), kernel_, out_);
  for (int32_t k = 0; k < 3; ++k) ASSERT_TRUE(bare.launch_and_wait(k));
  AllocCounter bare_counter;
  for (int32_t k = 0; k < kLaunches; ++k) ASSERT_TRUE(bare.launch_and_wait(k));
  const uint64_t bare_allocs = bare_counter.counts().kad_allocs;
  AllocCounter client_counter;
  for (int32_t k = 0; k < kLaunches; ++k) ASSERT_TRUE(launch_and_wait(k).ok());
  const uint64_t client_allocs = client_counter.counts().kad_allocs;
  // Outside gRPC's core, both run the same protobuf code on the same
  // messages; anything more is the client library's own.
  EXPECT_EQ(client_allocs, bare_allocs)
      << "allocations on this thread outside gRPC's core over " << kLaunches
      << " launches and waits: the client library's gRPC transport " << client_allocs
      << ", a bare Submit stream of the same messages " << bare_allocs;
  expect_written_by(kLaunches - 1);
}

TEST_F(TransportAllocations, GrpcWarmRunAllocatesNothingBeyondABareStream) {
  connect("grpc-unix");
  std::string unix_uri = daemon_.uri("grpc-unix");
  unix_uri.resize(unix_uri.find('?'));
  BareSubmitStream bare(unix_uri, client_->session_id(), queue_->handle(), kernel_, out_);
  for (int32_t k = 0; k < 3; ++k) ASSERT_TRUE(bare.run(k));
  for (int32_t k = 0; k < 3; ++k) ASSERT_TRUE(run(k).ok());
  AllocCounter bare_counter;
  for (int32_t k = 0; k < kLaunches; ++k) ASSERT_TRUE(bare.run(k));
  const uint64_t bare_allocs = bare_counter.counts().kad_allocs;
  AllocCounter client_counter;
  for (int32_t k = 0; k < kLaunches; ++k) ASSERT_TRUE(run(k).ok());
  const uint64_t client_allocs = client_counter.counts().kad_allocs;
  EXPECT_EQ(client_allocs, bare_allocs)
      << "allocations on this thread outside gRPC's core over " << kLaunches
      << " runs: the client library's gRPC transport " << client_allocs
      << ", a bare Submit stream of the same messages " << bare_allocs;
  expect_written_by(kLaunches - 1);
}

TEST_F(TransportAllocations, GrpcCounterSeesTheClientAllocate) {
  // Not blind with gRPC's core set aside: a refused launch becomes a status
  // with a message in the client library.
  connect("grpc-unix");
  const client::Kernel unknown{kernel_.handle + 1000};
  const Arg args[] = {Arg::buffer(out_), Arg::scalar<int32_t>(2), Arg::scalar<int32_t>(0)};
  AllocCounter counter;
  EXPECT_FALSE(queue_->launch(unknown, &range_, nullptr, args).ok());
  EXPECT_GT(counter.counts().kad_allocs, 0u);
}

}  // namespace
}  // namespace kad
