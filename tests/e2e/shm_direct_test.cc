// The direct path (--shm-direct, kad's default; server/README.md): a shared-memory client
// that repeats one launch (synchronous or pipelined) has its channel lent to
// its session's worker, which serves those launches without kad. The client sees one
// queue either way: the same events and results, kad's answers for
// everything else, kad's messages for a worker's crash or a launch past its
// deadline, and the session going on after.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/metrics_scrape.h"

namespace kad::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// v == -1 faults, v == -2 loops for good, v > 1000 spins v times and adds
// 1 (a long launch: the worker runs such a kernel's launches on a thread of
// the queue's, its request loop going on meanwhile); otherwise adds v to each item.
constexpr char kAddSource[] =
    "kernel void add(KAD_CONTEXT, global int* out, int v) {\n"
    "  if (!kad_active()) return;\n"
    "  if (v == -1) *(global volatile int*)0 = 1;\n"
    "  if (v == -2) { volatile int spin = 1; while (spin) { } }\n"
    "  if (v > 1000) { volatile int n = 0; for (int i = 0; i < v; ++i) n += 1; v = 1; }\n"
    "  out[kad_global_linear()] += v;\n}\n";

constexpr int kItems = 16;
constexpr int32_t kLongLaunch = 2'000'000;  // a few ms per item
constexpr char kLentLog[] = "lent to the session's worker";

class ShmDirect : public DaemonSuite {
 protected:
  static void SetUpTestSuite() {
    auto d = Daemon::start({"--launch-timeout", "3"});  // the direct path by default
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = d->release();
  }

  void SetUp() override {
    client_ = connect(daemon().unix_uri(), "direct");
    ASSERT_NE(client_, nullptr);
    auto q = client_->create_queue();
    ASSERT_TRUE(q.ok()) << q.status();
    queue_ = *std::move(q);
    ASSERT_TRUE(queue_->shared_memory());
    auto b = client_->allocate(kItems * sizeof(int32_t));
    auto m = client_->load_module(kAddSource);
    ASSERT_TRUE(b.ok() && m.ok()) << m.status();
    buffer_ = *b;
    auto k =
        client_->get_kernel(*m, {.entry = "add",
                                 .args = {client::ArgSpec::buffer(),
                                          client::ArgSpec::scalar_of(client::ScalarType::kI32)}});
    ASSERT_TRUE(k.ok()) << k.status();
    kernel_ = *k;
    const std::vector<int32_t> zeros(kItems, 0);
    ASSERT_TRUE(queue_->write(buffer_, 0, bytes_of(zeros)).ok());
  }

  absl::StatusOr<client::LaunchInfo> run(int32_t v) {
    const client::Arg args[] = {client::Arg::buffer(buffer_), client::Arg::scalar<int32_t>(v)};
    return queue_->run(kernel_, client::Dims{kItems}, nullptr, args);
  }

  // Runs add(v) for v = from .. to, each answered; the events they had.
  std::vector<uint64_t> run_each(int32_t from, int32_t to) {
    std::vector<uint64_t> events;
    for (int32_t v = from; v <= to; ++v) {
      absl::StatusOr<client::LaunchInfo> r = run(v);
      EXPECT_TRUE(r.ok()) << "add(" << v << "): " << r.status();
      events.push_back(r.ok() ? r->event : 0);
    }
    return events;
  }

  absl::Status submit(int32_t v) {
    const client::Arg args[] = {client::Arg::buffer(buffer_), client::Arg::scalar<int32_t>(v)};
    const client::Dims ndrange{kItems};
    return queue_->submit(kernel_, &ndrange, nullptr, args);
  }

  // `rounds` times: `each` pipelined launches of add(1), then one wait.
  void submit_rounds(int rounds, int each) {
    for (int r = 0; r < rounds; ++r) {
      for (int i = 0; i < each; ++i) ASSERT_TRUE(submit(1).ok()) << r << "/" << i;
      ASSERT_TRUE(queue_->wait().ok()) << r;
    }
  }

  std::vector<int32_t> contents() {
    std::vector<int32_t> out(kItems, -7);
    const absl::Status read = queue_->read(buffer_, 0, bytes_of(out));
    EXPECT_TRUE(read.ok()) << read;
    return out;
  }

  // kad logs a loan once the worker took it: by then the worker may have
  // answered the launches that followed, so the line may come a little later.
  static bool lent_since(size_t log_bytes) {
    for (int i = 0; i < 100; ++i) {
      if (daemon().log().find(kLentLog, log_bytes) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  std::unique_ptr<Client> client_;
  std::unique_ptr<client::Queue> queue_;
  client::Buffer buffer_;
  client::Kernel kernel_;
};

TEST_F(ShmDirect, RepeatedRunsAreAnsweredByTheWorkerWithKadsEventsAndResults) {
  const size_t log_bytes = daemon().log().size();
  auto before = client_->status();
  ASSERT_TRUE(before.ok()) << before.status();
  const std::vector<uint64_t> events = run_each(1, 20);
  EXPECT_TRUE(lent_since(log_bytes)) << daemon().log();
  // One event per launch, consecutive across kad's answers and the worker's.
  for (size_t i = 1; i < events.size(); ++i) EXPECT_EQ(events[i], events[i - 1] + 1) << i;
  // A copy is kad's: the channel comes back, after every launch before it.
  EXPECT_EQ(contents(), std::vector<int32_t>(kItems, 210));
  // kad counts the worker's launches as its own (within its look, 50 ms).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto after = client_->status();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->launches - before->launches, 20u);
  // One loan, lent now, and every run after the fourth (which kad answered
  // before it lent the channel) the worker's.
  EXPECT_EQ(after->channels_lent - before->channels_lent, 1u);
  EXPECT_EQ(after->channel_loans - before->channel_loans, 1u);
  EXPECT_EQ(after->lent_launches - before->lent_launches, 16u);
  // After the hand-back, a wait and kad's own launches go on from there.
  EXPECT_TRUE(queue_->wait().ok());
  const client::Arg args[] = {client::Arg::buffer(buffer_), client::Arg::scalar<int32_t>(1)};
  auto submitted = queue_->launch(kernel_, client::Dims{kItems}, nullptr, args);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->event, events.back() + 1);
  EXPECT_TRUE(queue_->wait().ok());
  EXPECT_EQ(contents(), std::vector<int32_t>(kItems, 211));
  auto back = client_->status();
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->channels_lent, before->channels_lent) << "the channel came back";
  EXPECT_EQ(back->lent_launches, after->lent_launches);
  EXPECT_EQ(back->launches - after->launches, 1u);
}

TEST_F(ShmDirect, CopiesAndWaitsBetweenRunsAreTheWorkersToo) {
  const size_t log_bytes = daemon().log().size();
  for (int32_t v = 1; v <= 12; ++v) {
    const std::vector<int32_t> start(kItems, 100 * v);
    ASSERT_TRUE(queue_->write(buffer_, 0, bytes_of(start)).ok());
    ASSERT_TRUE(run(v).ok()) << v;
    ASSERT_TRUE(queue_->wait().ok());
    ASSERT_EQ(contents(), std::vector<int32_t>(kItems, 101 * v)) << v;
  }
  EXPECT_TRUE(lent_since(log_bytes)) << daemon().log();
  // A copy past the buffer's end is kad's to refuse, in kad's words, and
  // the queue goes on.
  std::vector<int32_t> two(2);
  const absl::Status past = queue_->read(buffer_, (kItems - 1) * sizeof(int32_t), bytes_of(two));
  EXPECT_FALSE(past.ok());
  EXPECT_THAT(past.message(), HasSubstr("buffer"));
  ASSERT_TRUE(run(1).ok());
  EXPECT_EQ(contents(), std::vector<int32_t>(kItems, 1213));
}

TEST_F(ShmDirect, AFreeThatCameAnotherWayTakesTheChannelBackFirst) {
  const size_t log_bytes = daemon().log().size();
  run_each(1, 6);
  ASSERT_TRUE(lent_since(log_bytes)) << daemon().log();
  // Over gRPC, while the worker holds the channel: kad takes it back.
  ASSERT_TRUE(client_->free(buffer_).ok());
  absl::StatusOr<client::LaunchInfo> r = run(1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("does not have"));
  EXPECT_TRUE(queue_->ping().ok());
}

TEST_F(ShmDirect, AFaultInALentRunIsAnsweredAbortedAndTheSessionGoesOn) {
  const size_t log_bytes = daemon().log().size();
  run_each(1, 6);
  ASSERT_TRUE(lent_since(log_bytes)) << daemon().log();
  absl::StatusOr<client::LaunchInfo> crashed = run(-1);
  ASSERT_FALSE(crashed.ok());
  EXPECT_EQ(crashed.status().code(), absl::StatusCode::kAborted) << crashed.status();
  EXPECT_THAT(crashed.status().message(),
              AllOf(HasSubstr("signal 11"), HasSubstr("kernel `add`"), HasSubstr("was lost")));
  // The session goes on in a new worker: its buffer as it was (21 = 1+..+6).
  absl::StatusOr<client::LaunchInfo> again = run(1);
  EXPECT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(contents(), std::vector<int32_t>(kItems, 22));
  expect_bystander_served(daemon().unix_uri(), 5, kFillSource, /*shared_memory=*/true);
}

TEST_F(ShmDirect, ALentRunPastItsDeadlineIsAnsweredDeadlineExceeded) {
  const size_t log_bytes = daemon().log().size();
  run_each(1, 6);
  ASSERT_TRUE(lent_since(log_bytes)) << daemon().log();
  absl::StatusOr<client::LaunchInfo> looped = run(-2);
  ASSERT_FALSE(looped.ok());
  EXPECT_EQ(looped.status().code(), absl::StatusCode::kDeadlineExceeded) << looped.status();
  EXPECT_THAT(looped.status().message(), HasSubstr("kernel `add`"));
  absl::StatusOr<client::LaunchInfo> again = run(1);
  EXPECT_TRUE(again.ok()) << again.status();
  expect_bystander_served(daemon().unix_uri(), 6, kFillSource, /*shared_memory=*/true);
}

TEST_F(ShmDirect, PipelinedLaunchesAreTheWorkersWithKadsEventsResultsAndCounts) {
  const size_t log_bytes = daemon().log().size();
  auto before = client_->status();
  ASSERT_TRUE(before.ok()) << before.status();
  absl::StatusOr<client::LaunchInfo> first = run(1);
  ASSERT_TRUE(first.ok()) << first.status();
  // kad serves the first round; the wait that ends it leaves the queue
  // idle, and the channel is lent there.
  submit_rounds(10, 20);
  EXPECT_TRUE(lent_since(log_bytes)) << daemon().log();
  EXPECT_EQ(contents(), std::vector<int32_t>(kItems, 201));
  // A read with no wait comes after the launches before it, as from kad
  // (the client waits before it reads a buffer kad maps for it).
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(submit(1).ok()) << i;
  EXPECT_EQ(contents(), std::vector<int32_t>(kItems, 301));
  // And after long ones, which run beside the worker's request loop.
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(submit(kLongLaunch).ok()) << i;
  EXPECT_EQ(contents(), std::vector<int32_t>(kItems, 309));
  ASSERT_TRUE(queue_->wait().ok());
  // A launch the worker does not answer is kad's, numbered after them all.
  const client::Arg args[] = {client::Arg::buffer(buffer_), client::Arg::scalar<int32_t>(1)};
  auto answered = queue_->launch(kernel_, client::Dims{kItems}, nullptr, args);
  ASSERT_TRUE(answered.ok()) << answered.status();
  EXPECT_EQ(answered->event, first->event + 309);
  EXPECT_TRUE(queue_->wait().ok());
  EXPECT_EQ(contents(), std::vector<int32_t>(kItems, 310));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto after = client_->status();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->launches - before->launches, 310u);
  EXPECT_EQ(after->queue_depth, 0u);
}

TEST_F(ShmDirect, AFaultInALentPipelinedLaunchIsReportedByTheNextWait) {
  const size_t log_bytes = daemon().log().size();
  submit_rounds(3, 8);
  ASSERT_TRUE(lent_since(log_bytes)) << daemon().log();
  ASSERT_TRUE(submit(1).ok());
  ASSERT_TRUE(submit(-1).ok());
  ASSERT_TRUE(submit(1).ok());
  const absl::Status waited = queue_->wait();
  EXPECT_EQ(waited.code(), absl::StatusCode::kAborted) << waited;
  EXPECT_THAT(waited.message(), AllOf(HasSubstr("signal 11"), HasSubstr("kernel `add`")));
  // Reported once; the session goes on in a new worker, its buffer kept.
  EXPECT_TRUE(queue_->wait().ok());
  const std::vector<int32_t> kept = contents();
  ASSERT_TRUE(run(1).ok());
  std::vector<int32_t> one_more = kept;
  for (int32_t& x : one_more) ++x;
  EXPECT_EQ(contents(), one_more);
  expect_bystander_served(daemon().unix_uri(), 7, kFillSource, /*shared_memory=*/true);
}

TEST_F(ShmDirect, ALentPipelinedLaunchPastItsDeadlineEndsWithNoWaitAndTheWaitSaysSo) {
  const size_t log_bytes = daemon().log().size();
  submit_rounds(3, 8);
  ASSERT_TRUE(lent_since(log_bytes)) << daemon().log();
  auto before = client_->status();
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(submit(-2).ok());
  // Nobody waits: kad, watching the worker's progress, ends it at the
  // deadline (3 s) all the same.
  absl::StatusOr<client::ServiceStatus> s;
  for (int i = 0; i < 200; ++i) {
    s = client_->status();
    ASSERT_TRUE(s.ok()) << s.status();
    if (s->workers_timed_out > before->workers_timed_out) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(s->workers_timed_out, before->workers_timed_out + 1);
  const absl::Status waited = queue_->wait();
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded) << waited;
  EXPECT_THAT(waited.message(), HasSubstr("kernel `add`"));
  EXPECT_TRUE(run(1).ok());
  expect_bystander_served(daemon().unix_uri(), 8, kFillSource, /*shared_memory=*/true);
}

TEST_F(ShmDirect, ClosingTheSessionWhileLentEndsItsChannelAndCountsNothingLeft) {
  const size_t log_bytes = daemon().log().size();
  run_each(1, 6);
  ASSERT_TRUE(lent_since(log_bytes)) << daemon().log();
  queue_.reset();
  client_.reset();  // closes the session: its worker goes, the channel with it
  auto observer = connect(daemon().unix_uri(), "observer");
  ASSERT_NE(observer, nullptr);
  absl::StatusOr<client::ServiceStatus> s;
  for (int i = 0; i < 100; ++i) {
    s = observer->status();
    ASSERT_TRUE(s.ok()) << s.status();
    if (s->sessions == 1 && s->queue_depth == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(s->sessions, 1u);
  EXPECT_EQ(s->queue_depth, 0u);
}

TEST_F(ShmDirect, AChannelGivenBackIsLentAgainAndServedAsBefore) {
  auto before = client_->status();
  ASSERT_TRUE(before.ok()) << before.status();
  run_each(1, 8);
  // A launch the worker does not answer: the channel comes back to kad.
  const client::Arg args[] = {client::Arg::buffer(buffer_), client::Arg::scalar<int32_t>(100)};
  ASSERT_TRUE(queue_->launch(kernel_, client::Dims{kItems}, nullptr, args).ok());
  ASSERT_TRUE(queue_->wait().ok());
  run_each(1, 8);
  EXPECT_EQ(contents(), std::vector<int32_t>(kItems, 172));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto after = client_->status();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->channel_loans - before->channel_loans, 2u);
}

// --no-shm-direct: kad serves every record itself, as before the direct path.
class NoShmDirect : public ShmDirect {
 protected:
  static void SetUpTestSuite() {
    auto d = Daemon::start({"--no-shm-direct"});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = d->release();
  }
};

TEST_F(NoShmDirect, RepeatedRunsAndPipelinesAreKadsAlone) {
  auto before = client_->status();
  ASSERT_TRUE(before.ok()) << before.status();
  run_each(1, 20);
  submit_rounds(5, 20);
  EXPECT_EQ(contents(), std::vector<int32_t>(kItems, 310));
  auto after = client_->status();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->launches - before->launches, 120u);
  EXPECT_EQ(after->channel_loans, 0u);
  EXPECT_EQ(after->lent_launches, 0u);
  EXPECT_EQ(daemon().log().find(kLentLog), std::string::npos) << daemon().log();
}

// The same daemon with a second tenant, whose clients come over TCP with
// a bearer token: lent launches never take that tenant's share of the
// device (DeviceScheduler: a channel is lent only while its tenant is alone
// on the device, and another tenant's launch takes it back).
class ShmDirectBesideAnotherTenant : public ShmDirect {
 protected:
  static constexpr char kOtherToken[] = "other-tenant-token-0123456789";

  static void SetUpTestSuite() {
    char dir[] = "/tmp/kad-direct-tenants-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    std::ofstream(dir_ + "/tokens") << kOtherToken << " other\n";
    auto d = Daemon::start(
        {"--launch-timeout", "3", "--tokens", dir_ + "/tokens", "--metrics", "tcp://127.0.0.1:0"});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = d->release();
  }
  static void TearDownTestSuite() {
    DaemonSuite::TearDownTestSuite();
    std::filesystem::remove_all(dir_);
  }

  client::ServiceStatus status() {
    auto s = client_->status();
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : client::ServiceStatus{};
  }
  // Loans ended so far for `reason` (kad_channel_loan_ends_total).
  double loan_ends(const std::string& reason) {
    return value_of(scrape(daemon().metrics_url()),
                    "kad_channel_loan_ends_total{reason=\"" + reason + "\"}");
  }
  // Waits (up to 2 s) until `lent` channels are lent; how many are.
  uint64_t await_lent(uint64_t lent) {
    uint64_t now = 0;
    for (int i = 0; i < 100 && (now = status().channels_lent) != lent; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return now;
  }

  static inline std::string dir_;
};

TEST_F(ShmDirectBesideAnotherTenant, AnotherTenantsLaunchesTakeTheChannelBackUntilTheyRest) {
  const size_t log_bytes = daemon().log().size();
  run_each(1, 20);
  ASSERT_TRUE(lent_since(log_bytes)) << daemon().log();
  ASSERT_EQ(await_lent(1), 1u);
  const double contention_ends = loan_ends("contention");
  ASSERT_GE(contention_ends, 0);

  // Another tenant's long launches come to the device, over TCP.
  client::ConnectOptions options;
  options.token = kOtherToken;
  auto other = Client::connect(daemon().tcp_uri(), "other", options);
  ASSERT_TRUE(other.ok()) << other.status();
  auto q = (*other)->create_queue();
  auto b = (*other)->allocate(kItems * sizeof(int32_t));
  auto m = (*other)->load_module(kAddSource);
  ASSERT_TRUE(q.ok() && b.ok() && m.ok()) << q.status() << b.status() << m.status();
  auto k = (*other)->get_kernel(
      *m,
      {.entry = "add",
       .args = {client::ArgSpec::buffer(), client::ArgSpec::scalar_of(client::ScalarType::kI32)}});
  ASSERT_TRUE(k.ok()) << k.status();
  const std::vector<int32_t> zeros(kItems, 0);
  ASSERT_TRUE((*q)->write(*b, 0, bytes_of(zeros)).ok());
  constexpr int kOthersLaunches = 40;  // a few ms per item each: seconds in all
  const client::Arg args[] = {client::Arg::buffer(*b), client::Arg::scalar<int32_t>(kLongLaunch)};
  const client::Dims ndrange{kItems};
  for (int i = 0; i < kOthersLaunches; ++i)
    ASSERT_TRUE((*q)->submit(*k, &ndrange, nullptr, args).ok()) << i;

  // The channel came back: the session's worker no longer holds it idle.
  EXPECT_EQ(await_lent(0), 0u) << "another tenant's launches are on the device";
  // Counted as the scheduler's recall, once.
  EXPECT_EQ(loan_ends("contention"), contention_ends + 1);
  // While the other tenant's launches run, this session's come through kad
  // (and take turns with them): none of them is lent.
  const client::ServiceStatus before = status();
  run_each(1, 20);
  const client::ServiceStatus during = status();
  ASSERT_FALSE(during.devices.empty());
  ASSERT_GT(during.devices[0].in_flight + during.devices[0].held, 0u)
      << "the other tenant's launches ended before this session's: nothing was tested";
  EXPECT_EQ(during.channel_loans, before.channel_loans);
  EXPECT_EQ(during.lent_launches, before.lent_launches);
  EXPECT_EQ(contents(), std::vector<int32_t>(kItems, 420));

  // Once the other tenant rested (DeviceScheduler::kIdleCatchUp), the
  // channel is lent again.
  ASSERT_TRUE((*q)->wait().ok());
  std::vector<int32_t> theirs(kItems, -7);
  ASSERT_TRUE((*q)->read(*b, 0, bytes_of(theirs)).ok());
  EXPECT_EQ(theirs, std::vector<int32_t>(kItems, kOthersLaunches));
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  run_each(1, 20);
  EXPECT_EQ(await_lent(1), 1u);
  EXPECT_EQ(status().channel_loans, before.channel_loans + 1);
  EXPECT_EQ(contents(), std::vector<int32_t>(kItems, 630));
}

}  // namespace
}  // namespace kad::testing
