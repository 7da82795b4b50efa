// How a client waits on the shared-memory channel: it spins first only where
// the answer is near. A wait behind many launches, or for room in a full
// submission ring, sleeps at once, so that the client leaves the cores to
// kad and the driver that run them; kad wakes it for room only once half
// the ring is free.
#include <sys/resource.h>
#include <time.h>

#include <cstdint>
#include <vector>

#include "tests/e2e/e2e.h"

namespace kad::testing {
namespace {

// Each work-item loops `n` times: a launch of 16 items with n = 1'000'000
// keeps PoCL busy for milliseconds, well past a client's spin.
constexpr char kSlowSource[] =
    "kernel void slow(KAD_CONTEXT, global float* out, int n) {\n"
    "  if (!kad_active()) return;\n"
    "  float x = out[kad_global_linear()];\n"
    "  for (int i = 0; i < n; ++i) x = x * 0.999f + 1.0f;\n"
    "  out[kad_global_linear()] = x;\n}\n";

int64_t thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// The calling thread's sleeps so far (voluntary context switches).
int64_t thread_sleeps() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_nvcsw;
}

int64_t wall_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

class ShmWaits : public DaemonSuite {
 protected:
  void SetUp() override {
    client_ = connect(daemon().unix_uri(), "waits");
    ASSERT_NE(client_, nullptr);
    auto q = client_->create_queue();
    ASSERT_TRUE(q.ok()) << q.status();
    queue_ = *std::move(q);
    ASSERT_TRUE(queue_->shared_memory());
    auto b = client_->allocate(16 * sizeof(float));
    auto m = client_->load_module(kSlowSource);
    ASSERT_TRUE(b.ok() && m.ok()) << m.status();
    buffer_ = *b;
    auto k =
        client_->get_kernel(*m, {.entry = "slow",
                                 .args = {client::ArgSpec::buffer(),
                                          client::ArgSpec::scalar_of(client::ScalarType::kI32)}});
    ASSERT_TRUE(k.ok()) << k.status();
    kernel_ = *k;
    // Compiled and warm: what follows times waits only.
    ASSERT_TRUE(submit_and_wait(1, 1).ok());
  }

  // Submits `launches` launches of `n` loops each, then waits for them all;
  // the client thread's CPU time in the wait.
  absl::StatusOr<int64_t> submit_and_wait(int launches, int32_t n) {
    const client::Arg args[] = {client::Arg::buffer(buffer_), client::Arg::scalar<int32_t>(n)};
    const client::Dims ndrange{16};
    for (int i = 0; i < launches; ++i) {
      if (absl::Status s = queue_->submit(kernel_, &ndrange, nullptr, args); !s.ok()) return s;
    }
    const int64_t before = thread_cpu_ns();
    if (absl::Status s = queue_->wait(); !s.ok()) return s;
    return thread_cpu_ns() - before;
  }

  std::unique_ptr<Client> client_;
  std::unique_ptr<client::Queue> queue_;
  client::Buffer buffer_;
  client::Kernel kernel_;
};

TEST_F(ShmWaits, AWaitBehindManyLaunchesSleepsAtOnceWhereOneBehindALaunchSpinsFirst) {
  // Best of three each: a wait's CPU time only grows when the machine is busy.
  int64_t one = INT64_MAX, many = INT64_MAX;
  for (int round = 0; round < 3; ++round) {
    absl::StatusOr<int64_t> behind_one = submit_and_wait(1, 1'000'000);
    absl::StatusOr<int64_t> behind_many = submit_and_wait(16, 100'000);
    ASSERT_TRUE(behind_one.ok()) << behind_one.status();
    ASSERT_TRUE(behind_many.ok()) << behind_many.status();
    one = std::min(one, *behind_one);
    many = std::min(many, *behind_many);
  }
  // Behind one launch the client spins first (kad's only busy channel: the
  // cores allow it), and the launch outlasts the spin.
  EXPECT_GT(one, 100'000) << "ns of CPU in a wait behind one launch";
  // Behind 16 it sleeps: a futex wait and a wake-up, no spin.
  EXPECT_LT(many * 4, one) << "ns of CPU in a wait behind 16 launches, against " << one
                           << " behind one";
}

TEST_F(ShmWaits, AClientWithAFullRingSleepsUntilKadHasFreedAQuarterOfIt) {
  // 1024 short launches (~50 us each): the submission ring (256 records) fills,
  // and the client waits for room for most of the launches.
  const client::Arg args[] = {client::Arg::buffer(buffer_), client::Arg::scalar<int32_t>(2'000)};
  const client::Dims ndrange{16};
  constexpr int kLaunches = 1024;
  const int64_t sleeps_before = thread_sleeps();
  const int64_t cpu_before = thread_cpu_ns();
  const int64_t wall_before = wall_ns();
  for (int i = 0; i < kLaunches; ++i) {
    ASSERT_TRUE(queue_->submit(kernel_, &ndrange, nullptr, args).ok());
  }
  const int64_t cpu = thread_cpu_ns() - cpu_before;
  const int64_t wall = wall_ns() - wall_before;
  const int64_t sleeps = thread_sleeps() - sleeps_before;
  ASSERT_TRUE(queue_->wait().ok());
  // About (1024 - 256) / 64 = 12 waits for a quarter of a ring; woken at every
  // record kad consumed, the client would sleep again for each of ~768.
  EXPECT_LT(sleeps, 64) << "sleeps while submitting " << kLaunches << " launches";
  // Spinning for each slot, the client was busy for a quarter to a third
  // of the time; sleeping, for about 2 %.
  EXPECT_LT(cpu * 10, wall) << "ns of CPU in " << wall << " ns of submitting";
}

}  // namespace
}  // namespace kad::testing
