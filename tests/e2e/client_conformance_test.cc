// The conformance kernels through a real kad process and the client library,
// over a UNIX socket, loopback TCP, and in process.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/dims.h"
#include "gmock/gmock.h"
#include "tests/e2e/e2e.h"
#include "tests/formats/ir_modules.h"
#include "tests/support/index_kernel.h"

namespace kad {
namespace {

using client::Arg;
using client::ArgSpec;
using testing::bytes_of;
using ::testing::HasSubstr;

kad::Dims to_core(const client::Dims& d) {
  kad::Dims out;
  out.rank = d.rank;
  for (int i = 0; i < d.rank; ++i) out[i] = d[i];
  return out;
}

// A second kad, serving Submit streams as reactors (--submit-streams
// reactors): the "tcp_reactors" transport. Started at its first use.
const testing::Daemon& reactor_daemon() {
  static const std::unique_ptr<testing::Daemon> daemon = [] {
    auto d = testing::Daemon::start({"--submit-streams", "reactors"});
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : nullptr;
  }();
  return *daemon;
}

class ClientConformance : public testing::DaemonSuite,
                          public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    const std::string t = GetParam();
    uri_ = t == "shm"            ? daemon().unix_uri() + "?transport=shm"
           : t == "unix_grpc"    ? daemon().unix_uri() + "?transport=grpc"
           : t == "unix"         ? daemon().unix_uri()
           : t == "tcp"          ? daemon().tcp_uri()
           : t == "tcp_reactors" ? reactor_daemon().tcp_uri()
                                 : "inproc:";
    client_ = connect(uri_);
    ASSERT_NE(client_, nullptr);
    auto q = client_->create_queue();
    ASSERT_TRUE(q.ok()) << q.status();
    queue_ = *std::move(q);
    // A local UNIX socket uses shared memory unless gRPC is asked for.
    EXPECT_EQ(queue_->shared_memory(), t == "shm" || t == "unix");
  }
  std::string uri_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<client::Queue> queue_;
};

struct Shape {
  client::Dims extents;
  client::Dims offsets;  // rank 0: none
  std::optional<client::Dims> workgroup;
  bool static_ndrange;
};

// Every index query of the conformance kernel in `module`, launched through
// the daemon for a set of shapes, against the column-major layout.
void check_index_queries(Client& client, client::Queue& queue, const client::Module& module,
                         const std::string& uri) {
  const std::vector<Shape> shapes = {
      {{}, {}, std::nullopt, false},           {{37}, {}, client::Dims{4}, false},
      {{5, 7}, {}, client::Dims{2, 3}, false}, {{3, 5, 7}, {}, client::Dims{4, 1, 2}, true},
      {{2, 3, 4, 5}, {}, std::nullopt, false}, {{9, 5}, {0, -2}, std::nullopt, true},
  };
  for (const Shape& shape : shapes) {
    client::KernelSpec spec{"indices",    std::nullopt,        std::nullopt,
                            std::nullopt, {ArgSpec::buffer()}, ""};
    if (shape.static_ndrange) {
      spec.static_ndrange = shape.extents;
      if (shape.offsets.rank) spec.static_offsets = shape.offsets;
    }
    auto kernel = client.get_kernel(module, spec);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const kad::NdRange range(
        to_core(shape.extents),
        shape.offsets.rank ? to_core(shape.offsets) : kad::Dims::filled(shape.extents.rank, 0));
    int64_t n = 1;
    ASSERT_TRUE(kad::checked_product(range.extents, &n));
    std::vector<int64_t> host(static_cast<size_t>((n + 8) * testing::kFields), testing::kPoison);
    auto out = client.allocate(host.size() * sizeof(int64_t));
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_TRUE(queue.write(*out, 0, bytes_of(host)).ok());
    const Arg args[] = {Arg::buffer(*out)};
    auto launched = queue.launch(*kernel, shape.static_ndrange ? nullptr : &shape.extents,
                                 shape.workgroup ? &*shape.workgroup : nullptr, args,
                                 shape.offsets.rank ? &shape.offsets : nullptr);
    ASSERT_TRUE(launched.ok()) << launched.status();
    ASSERT_TRUE(queue.wait(launched->event).ok());
    ASSERT_TRUE(queue.read(*out, 0, bytes_of(host)).ok());
    kad::Dims wg = to_core(launched->workgroup), groups = kad::Dims::filled(range.rank(), 0);
    for (int d = 0; d < range.rank(); ++d) groups[d] = (range.extents[d] + wg[d] - 1) / wg[d];
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<int64_t> want = testing::expected_record(i, range, wg, groups);
      const std::vector<int64_t> have(host.begin() + i * testing::kFields,
                                      host.begin() + (i + 1) * testing::kFields);
      ASSERT_EQ(have, want) << "work-item " << i << " of " << to_string(range) << " over " << uri;
    }
    for (size_t i = static_cast<size_t>(n * testing::kFields); i < host.size(); ++i)
      ASSERT_EQ(host[i], testing::kPoison);
    ASSERT_TRUE(client.free(*out).ok());
  }
}

TEST_P(ClientConformance, IndexQueriesMatchTheColumnMajorLayout) {
  auto module = client_->load_module(testing::kIndexKernel);
  ASSERT_TRUE(module.ok()) << module.status();
  check_index_queries(*client_, *queue_, *module, uri_);
}

// The same kernel built by the client as SPIR-V against the installed
// prelude's linked form: the daemon specialises it per launch like source.
TEST_P(ClientConformance, SpirvModuleAnswersLikeItsSource) {
  absl::StatusOr<std::string> spirv =
      testing::build_linked_ir(testing::kIndexKernel, ModuleFormat::kSpirv);
  ASSERT_TRUE(spirv.ok()) << spirv.status();
  auto module = client_->load_module(client::ModuleFormat::kSpirv, *spirv);
  ASSERT_TRUE(module.ok()) << module.status();
  check_index_queries(*client_, *queue_, *module, uri_);
}

TEST_P(ClientConformance, LargeTransfersStreamInChunks) {
  const size_t n = (1 << 20) + 3;  // 4 MiB and a bit: several chunks each way
  std::vector<float> x(n), y(n, -1.0f);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i);
  auto b = client_->allocate(n * sizeof(float));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(queue_->write(*b, 0, bytes_of(x)).ok());
  auto module = client_->load_module(R"(
kernel void saxpy(KAD_CONTEXT, global float* x, float a) {
  if (kad_active()) x[kad_global_linear()] = a * x[kad_global_linear()] + 1.0f;
})");
  ASSERT_TRUE(module.ok());
  auto kernel = client_->get_kernel(
      *module, {"saxpy",
                std::nullopt,
                std::nullopt,
                std::nullopt,
                {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kF32)},
                ""});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const Arg args[] = {Arg::buffer(*b), Arg::scalar(2.0f)};
  auto launched = queue_->launch(*kernel, client::Dims{static_cast<int64_t>(n)}, nullptr, args);
  ASSERT_TRUE(launched.ok()) << launched.status();
  ASSERT_TRUE(queue_->read(*b, 0, bytes_of(y)).ok());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], 2.0f * static_cast<float>(i) + 1.0f) << i;
}

// Past one chunk, at an offset: the bytes land where asked and come back
// from there; a range past the end is refused before a byte is written.
TEST_P(ClientConformance, ALargeCopyAtAnOffsetLandsThereAndOnePastTheEndChangesNothing) {
  constexpr size_t kSize = 3 << 20, kOffset = 12, kLength = (2 << 20) + 5;
  auto b = client_->allocate(kSize);
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<std::byte> zeros(kSize), pattern(kLength);
  for (size_t i = 0; i < kLength; ++i) pattern[i] = static_cast<std::byte>(i * 7 + 3);
  ASSERT_TRUE(queue_->write(*b, 0, zeros).ok());
  ASSERT_TRUE(queue_->write(*b, kOffset, pattern).ok());
  std::vector<std::byte> back(kLength);
  ASSERT_TRUE(queue_->read(*b, kOffset, back).ok());
  EXPECT_TRUE(back == pattern);

  std::vector<std::byte> ones(2 << 20, std::byte{1});
  const absl::Status past = queue_->write(*b, kSize - (1 << 20), ones);
  EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange) << past;
  EXPECT_THAT(std::string(past.message()), HasSubstr("at offset 2097152 does not fit"));
  std::vector<std::byte> whole(kSize), expected(kSize);
  std::copy(pattern.begin(), pattern.end(), expected.begin() + kOffset);
  ASSERT_TRUE(queue_->read(*b, 0, whole).ok());
  EXPECT_TRUE(whole == expected) << "a refused write changed the buffer";
  const absl::Status past_read = queue_->read(*b, kSize - (1 << 20), ones);
  EXPECT_EQ(past_read.code(), absl::StatusCode::kOutOfRange) << past_read;
}

TEST_P(ClientConformance, ACompileErrorReturnsTheCompilerLog) {
  auto module = client_->load_module(
      "kernel void broken(KAD_CONTEXT, global int* x) {\n"
      "  x[0] = not_declared;\n}\n");
  ASSERT_TRUE(module.ok());
  auto kernel = client_->get_kernel(
      *module, {"broken", std::nullopt, std::nullopt, std::nullopt, {ArgSpec::buffer()}, ""});
  ASSERT_TRUE(kernel.ok());
  auto b = client_->allocate(64);
  const Arg args[] = {Arg::buffer(*b)};
  auto launched = queue_->launch(*kernel, client::Dims{4}, nullptr, args);
  ASSERT_FALSE(launched.ok());
  EXPECT_EQ(launched.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(launched.status().message().find("not_declared"), absl::string_view::npos)
      << launched.status();
  EXPECT_NE(launched.status().message().find("2:"), absl::string_view::npos) << "line number";
}

TEST_P(ClientConformance, SubmittedLaunchesPipelineAndTheirErrorsSurfaceAtWait) {
  auto module = client_->load_module(R"(
kernel void bump(KAD_CONTEXT, global int* x, int k) {
  if (kad_active()) x[kad_global_linear()] += k;
})");
  auto kernel = client_->get_kernel(
      *module, {"bump",
                std::nullopt,
                std::nullopt,
                std::nullopt,
                {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kI32)},
                ""});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::vector<int32_t> x(64, 0);
  auto b = client_->allocate(x.size() * sizeof(int32_t));
  ASSERT_TRUE(queue_->write(*b, 0, bytes_of(x)).ok());
  // The daemon refuses a launch without an ndrange; submit does not wait to hear it.
  const Arg bad[] = {Arg::buffer(*b), Arg::scalar<int32_t>(1)};
  ASSERT_TRUE(queue_->submit(*kernel, nullptr, nullptr, bad).ok());
  const absl::Status waited = queue_->wait();
  EXPECT_EQ(waited.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(waited.message().find("its ndrange is dynamic"), absl::string_view::npos) << waited;
  ASSERT_TRUE(queue_->wait().ok()) << "the error is reported once";

  // More than kMaxInFlight, so that back-pressure is exercised.
  const int n = client::Queue::kMaxInFlight + 300;
  for (int k = 1; k <= n; ++k) {
    const client::Dims range{64};
    const Arg args[] = {Arg::buffer(*b), Arg::scalar<int32_t>(k)};
    ASSERT_TRUE(queue_->submit(*kernel, &range, nullptr, args).ok());
  }
  ASSERT_TRUE(queue_->wait().ok());
  ASSERT_TRUE(queue_->read(*b, 0, bytes_of(x)).ok());
  EXPECT_EQ(x, std::vector<int32_t>(64, n * (n + 1) / 2));
}

// Launches reach the device in the order they were submitted, however they
// travel (a worker takes them from its launch ring, or from its socket when
// the ring is full): each step depends on the one before it.
TEST_P(ClientConformance, SubmittedLaunchesRunInTheOrderTheyWereSubmitted) {
  auto module = client_->load_module(R"(
kernel void step(KAD_CONTEXT, global uint* x, uint k) {
  if (kad_active()) x[kad_global_linear()] = x[kad_global_linear()] * 3u + k;
})");
  auto kernel = client_->get_kernel(
      *module, {"step",
                std::nullopt,
                std::nullopt,
                std::nullopt,
                {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kU32)},
                ""});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::vector<uint32_t> x(16, 0);
  auto b = client_->allocate(x.size() * sizeof(uint32_t));
  ASSERT_TRUE(queue_->write(*b, 0, bytes_of(x)).ok());
  const int n = client::Queue::kMaxInFlight + 300;
  uint32_t expected = 0;
  for (uint32_t k = 1; k <= static_cast<uint32_t>(n); ++k) {
    const client::Dims range{16};
    const Arg args[] = {Arg::buffer(*b), Arg::scalar<uint32_t>(k)};
    ASSERT_TRUE(queue_->submit(*kernel, &range, nullptr, args).ok());
    expected = expected * 3u + k;
  }
  ASSERT_TRUE(queue_->wait().ok());
  ASSERT_TRUE(queue_->read(*b, 0, bytes_of(x)).ok());
  EXPECT_EQ(x, std::vector<uint32_t>(16, expected));
}

class ClientConformanceBump : public ClientConformance {
 protected:
  // A kernel that adds k to each of 64 ints, and its buffer, zeroed.
  void SetUp() override {
    ClientConformance::SetUp();
    auto module = client_->load_module(R"(
kernel void bump(KAD_CONTEXT, global int* x, int k) {
  if (kad_active()) x[kad_global_linear()] += k;
})");
    ASSERT_TRUE(module.ok()) << module.status();
    auto kernel = client_->get_kernel(
        *module, {.entry = "bump",
                  .args = {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kI32)}});
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    kernel_ = *kernel;
    auto b = client_->allocate(64 * sizeof(int32_t));
    ASSERT_TRUE(b.ok()) << b.status();
    buffer_ = *b;
    std::vector<int32_t> zeros(64, 0);
    ASSERT_TRUE(queue_->write(buffer_, 0, bytes_of(zeros)).ok());
  }
  std::vector<int32_t> contents() {
    std::vector<int32_t> x(64, -1);
    EXPECT_TRUE(queue_->read(buffer_, 0, bytes_of(x)).ok());
    return x;
  }
  client::Kernel kernel_;
  client::Buffer buffer_;
  const client::Dims range_{64};
};

TEST_P(ClientConformanceBump, RunLaunchesAndWaitsInOneCall) {
  const Arg five[] = {Arg::buffer(buffer_), Arg::scalar<int32_t>(5)};
  auto before = client_->status();
  ASSERT_TRUE(before.ok()) << before.status();
  auto ran = queue_->run(kernel_, &range_, nullptr, five);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_NE(ran->event, 0u);
  EXPECT_EQ(ran->workgroup.rank, 1) << "the tuned workgroup is reported";
  // Done when run returns: kad counts it waited for, and a wait has nothing left.
  auto now = client_->status();
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(now->queue_depth, before->queue_depth) << "the run's launch was not waited for";
  EXPECT_EQ(now->launches, before->launches + 1);
  EXPECT_TRUE(queue_->wait(ran->event).ok());
  EXPECT_EQ(contents(), std::vector<int32_t>(64, 5));

  // A refused run says why at once, and runs nothing.
  const absl::StatusOr<client::LaunchInfo> refused = queue_->run(kernel_, nullptr, nullptr, five);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("its ndrange is dynamic"));

  // A submitted launch's failure is reported by the next run, once; that
  // run still ran.
  ASSERT_TRUE(queue_->submit(kernel_, nullptr, nullptr, five).ok());
  const absl::StatusOr<client::LaunchInfo> after = queue_->run(kernel_, &range_, nullptr, five);
  EXPECT_EQ(after.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(after.status().message(), HasSubstr("a submitted launch failed"));
  ASSERT_TRUE(queue_->run(kernel_, &range_, nullptr, five).ok());
  EXPECT_EQ(contents(), std::vector<int32_t>(64, 15));
}

TEST_P(ClientConformanceBump, ASubmittedLaunchsErrorNamesItsPlaceOnTheQueue) {
  // Launches 1 to 10 and 12 to 16 are good, launch 11 has no ndrange: a
  // batch over gRPC, records over shared memory, reported alike.
  for (int k = 1; k <= 16; ++k) {
    const Arg args[] = {Arg::buffer(buffer_), Arg::scalar<int32_t>(1)};
    ASSERT_TRUE(queue_->submit(kernel_, k == 11 ? nullptr : &range_, nullptr, args).ok());
  }
  const absl::Status waited = queue_->wait();
  EXPECT_EQ(waited.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(waited.message(), HasSubstr("launch 11 submitted on this queue"));
  EXPECT_THAT(waited.message(), HasSubstr("its ndrange is dynamic"));
  EXPECT_TRUE(queue_->wait().ok()) << "reported once";
  EXPECT_EQ(contents(), std::vector<int32_t>(64, 15)) << "the launches around it ran, in order";
}

TEST_P(ClientConformanceBump, MoreFailedSubmitsThanTheRingsHoldNeitherStallNorHideTheFirst) {
  // Over shared memory each failure is an answer that kad must post while
  // the client is still submitting: 700 is past both rings (256 slots each).
  const Arg args[] = {Arg::buffer(buffer_), Arg::scalar<int32_t>(1)};
  for (int k = 1; k <= 700; ++k)
    ASSERT_TRUE(queue_->submit(kernel_, nullptr, nullptr, args).ok()) << "launch " << k;
  const absl::Status waited = queue_->wait();
  EXPECT_EQ(waited.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(waited.message(), HasSubstr("launch 1 submitted on this queue"));
  EXPECT_TRUE(queue_->wait().ok()) << "reported once";
  ASSERT_TRUE(queue_->run(kernel_, &range_, nullptr, args).ok());
  EXPECT_EQ(contents(), std::vector<int32_t>(64, 1));
}

TEST_P(ClientConformanceBump, ASubmittedLaunchReachesKadWithoutAWait) {
  // A client that submits, then works on the host, has its launch run
  // meanwhile (over gRPC: the batch leaves after Queue::kFlushAfter).
  auto before = client_->status();
  ASSERT_TRUE(before.ok()) << before.status();
  const Arg args[] = {Arg::buffer(buffer_), Arg::scalar<int32_t>(7)};
  ASSERT_TRUE(queue_->submit(kernel_, &range_, nullptr, args).ok());
  uint64_t launches = before->launches;
  for (int i = 0; i < 1000 && launches == before->launches; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    auto now = client_->status();
    ASSERT_TRUE(now.ok()) << now.status();
    launches = now->launches;
  }
  EXPECT_EQ(launches, before->launches + 1) << "the submitted launch never reached kad";
  ASSERT_TRUE(queue_->wait().ok());
  EXPECT_EQ(contents(), std::vector<int32_t>(64, 7));
}

TEST_P(ClientConformanceBump, ALargeCopyComesAfterTheLaunchesSubmittedBeforeIt) {
  // Over gRPC a copy past 1 MiB travels on a call of its own; it must still
  // see (write) or follow (read) what was submitted before it.
  auto big = client_->allocate(uint64_t{3} << 20);
  ASSERT_TRUE(big.ok()) << big.status();
  std::vector<int32_t> host((uint64_t{3} << 20) / sizeof(int32_t), 1);
  ASSERT_TRUE(queue_->write(*big, 0, bytes_of(host)).ok());
  for (int round = 1; round <= 3; ++round) {
    const Arg args[] = {Arg::buffer(*big), Arg::scalar<int32_t>(10)};
    ASSERT_TRUE(queue_->submit(kernel_, &range_, nullptr, args).ok());
    std::vector<int32_t> back(host.size(), -1);
    ASSERT_TRUE(queue_->read(*big, 0, bytes_of(back)).ok());
    ASSERT_EQ(back[0], 1 + 10 * round) << "the read overtook the launch submitted before it";
    ASSERT_EQ(back[64], 1 + 10 * (round - 1)) << "past the launch: the last write's";
    // A large write then overwrites what the next launch writes, in order.
    ASSERT_TRUE(queue_->submit(kernel_, &range_, nullptr, args).ok());
    std::vector<int32_t> reset(host.size(), 1 + 10 * round);
    ASSERT_TRUE(queue_->write(*big, 0, bytes_of(reset)).ok());
  }
  ASSERT_TRUE(queue_->wait().ok());
}

INSTANTIATE_TEST_SUITE_P(Transports, ClientConformanceBump,
                         ::testing::Values("unix", "shm", "unix_grpc", "tcp", "tcp_reactors",
                                           "inproc"),
                         [](const auto& info) { return std::string(info.param); });

TEST_P(ClientConformance, PingIsARoundTripThatKeepsOrder) {
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(queue_->ping().ok());
  auto module = client_->load_module("kernel void nop(KAD_CONTEXT) {}");
  auto kernel = client_->get_kernel(*module, {.entry = "nop"});
  ASSERT_TRUE(queue_->submit(*kernel, nullptr, nullptr, {}).ok());  // refused: no ndrange
  ASSERT_TRUE(queue_->ping().ok());
  EXPECT_FALSE(queue_->wait().ok()) << "the submitted launch's error is still reported";
}

INSTANTIATE_TEST_SUITE_P(Transports, ClientConformance,
                         ::testing::Values("unix", "shm", "unix_grpc", "tcp", "tcp_reactors",
                                           "inproc"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace kad
