// --worker-scope device (DESIGN §8): one worker per device, shared by every
// session on it, as a GPU's one context per device will be. Every session's
// kernels run in that one process; a crash there ends every session's
// launches in progress (ABORTED, naming the device's worker and the signal)
// and the next request of any session starts a new worker that is given
// every session's buffers and queues again, their data intact. The session
// whose kernel faulted is told so; the others only that another session's
// kernel ended the worker. A session that closes leaves the worker to the
// others: its launches finish first.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "gmock/gmock.h"
#include "tests/e2e/e2e.h"
#include "tests/support/worker_process.h"

namespace kad {
namespace {

using client::Arg;
using client::ArgSpec;
using ::testing::AllOf;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// Spins while flag[0] is 0.
constexpr char kSpin[] =
    "kernel void spin(KAD_CONTEXT, global volatile int* flag) {\n"
    "  if (kad_active()) { while (flag[0] == 0) { } }\n}\n";
constexpr char kNullStore[] =
    "kernel void hostile(KAD_CONTEXT, global int* out) {\n"
    "  if (kad_active()) *(global volatile int*)0 = 1;\n}\n";

const client::KernelSpec kFillSpec{
    .entry = "fill", .args = {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kI32)}};

// A session with a fill kernel, a queue and a buffer of 1024 ints.
struct Tenant {
  std::unique_ptr<Client> client;
  std::unique_ptr<client::Queue> queue;
  client::Buffer buffer;
  client::Kernel fill;
};

Tenant ready_tenant(const std::string& uri, const std::string& name) {
  Tenant t;
  auto c = Client::connect(uri, name);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return t;
  t.client = *std::move(c);
  auto q = t.client->create_queue();
  auto b = t.client->allocate(1024 * sizeof(int32_t));
  auto m = t.client->load_module(testing::kFillSource);
  EXPECT_TRUE(q.ok() && b.ok() && m.ok());
  auto k = t.client->get_kernel(*m, kFillSpec);
  EXPECT_TRUE(k.ok()) << k.status();
  t.queue = *std::move(q);
  t.buffer = *b;
  t.fill = *k;
  return t;
}

void expect_fill(Tenant& t, int32_t value) {
  const Arg args[] = {Arg::buffer(t.buffer), Arg::scalar<int32_t>(value)};
  absl::Status s = t.queue->launch(t.fill, client::Dims{1024}, nullptr, args).status();
  ASSERT_TRUE(s.ok()) << s;
  s = t.queue->wait();
  ASSERT_TRUE(s.ok()) << s;
  std::vector<int32_t> got(1024);
  s = t.queue->read(t.buffer, 0, testing::bytes_of(got));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(got, std::vector<int32_t>(1024, value));
}

// kad's children but the compile workers, which end with their compile.
pid_t the_one_worker(pid_t daemon) {
  std::vector<pid_t> workers;
  for (const auto give_up = Clock::now() + std::chrono::seconds(20); Clock::now() < give_up;
       std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    workers = testing::children_of(daemon);
    if (workers.size() == 1) return workers[0];
  }
  ADD_FAILURE() << workers.size() << " workers, not one";
  return 0;
}

client::ServiceStatus status_of(Client& observer) {
  auto s = observer.status();
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : client::ServiceStatus{};
}

// A kad whose CPU device has one worker for every session (no spare, so
// that kad's children are that worker and the compile workers alone), and
// an observer's session.
class DeviceWorker : public ::testing::Test {
 protected:
  void start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--worker-scope", "device", "--worker-spares", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto d = testing::Daemon::start(args);
    ASSERT_TRUE(d.ok()) << d.status();
    d_ = *std::move(d);
    auto observer = Client::connect(d_->tcp_uri(), "observer");
    ASSERT_TRUE(observer.ok()) << observer.status();
    observer_ = *std::move(observer);
  }
  std::unique_ptr<testing::Daemon> d_;
  std::unique_ptr<Client> observer_;
};

// kad's status with these counts (what status_back_to waits for).
client::ServiceStatus holding(uint64_t sessions, uint64_t buffers, uint64_t queues) {
  client::ServiceStatus s;
  s.sessions = sessions;
  s.buffers = buffers;
  s.queues = queues;
  return s;
}

TEST_F(DeviceWorker, EverySessionOnTheDeviceRunsItsKernelsInTheOneWorker) {
  ASSERT_NO_FATAL_FAILURE(start());
  Tenant a = ready_tenant(d_->unix_uri(), "a");
  Tenant b = ready_tenant(d_->tcp_uri(), "b");
  ASSERT_NE(a.client, nullptr);
  ASSERT_NE(b.client, nullptr);
  expect_fill(a, 1);
  expect_fill(b, 2);
  const pid_t worker = the_one_worker(d_->pid());
  EXPECT_EQ(status_of(*observer_).workers_running, 1u);
  EXPECT_THAT(d_->log(), HasSubstr("one worker process per device, shared by every session"));
  // Each session's buffer holds its own values.
  expect_fill(a, 3);
  std::vector<int32_t> got(1024);
  ASSERT_TRUE(b.queue->read(b.buffer, 0, testing::bytes_of(got)).ok());
  EXPECT_EQ(got, std::vector<int32_t>(1024, 2));

  // Both go; the worker stays for the next session, which runs at once.
  a = {};
  b = {};
  // A client that goes does not wait for its session's close: kad's status
  // comes back to the observer alone soon after.
  const client::ServiceStatus back = testing::status_back_to(*observer_, holding(1, 0, 0));
  EXPECT_EQ(back.sessions, 1u);
  EXPECT_EQ(back.buffers, 0u);
  EXPECT_EQ(back.workers_running, 1u);
  EXPECT_EQ(back.workers_crashed, 0u);
  Tenant c = ready_tenant(d_->unix_uri(), "c");
  ASSERT_NE(c.client, nullptr);
  expect_fill(c, 4);
  EXPECT_EQ(the_one_worker(d_->pid()), worker);
}

TEST_F(DeviceWorker, ACrashEndsEverySessionsLaunchesInProgressAndANewWorkerServesThemAll) {
  ASSERT_NO_FATAL_FAILURE(start({"--launch-timeout", "30"}));
  const client::ServiceStatus before = status_of(*observer_);

  Tenant bystander = ready_tenant(d_->unix_uri(), "bystander");
  ASSERT_NE(bystander.client, nullptr);
  expect_fill(bystander, 7);
  auto flag = bystander.client->allocate(sizeof(int32_t));
  auto flags = bystander.client->create_queue();  // writes the flag while spin runs
  auto spin_module = bystander.client->load_module(kSpin);
  ASSERT_TRUE(flag.ok() && flags.ok() && spin_module.ok());
  auto spin =
      bystander.client->get_kernel(*spin_module, {.entry = "spin", .args = {ArgSpec::buffer()}});
  ASSERT_TRUE(spin.ok()) << spin.status();
  auto set_flag = [&](int32_t v) {
    ASSERT_TRUE((*flags)->write(*flag, 0, std::as_bytes(std::span(&v, 1))).ok());
  };
  const Arg spin_args[] = {Arg::buffer(*flag)};
  // A first launch that runs long: the worker runs the kernel's later
  // launches on the queue's own thread, not on the loop that serves every
  // session's requests.
  ASSERT_TRUE(bystander.queue->launch(*spin, client::Dims{1}, nullptr, spin_args).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  set_flag(1);
  ASSERT_TRUE(bystander.queue->wait().ok());
  // Now one that spins until the worker goes.
  set_flag(0);
  auto spinning = bystander.queue->launch(*spin, client::Dims{1}, nullptr, spin_args);
  ASSERT_TRUE(spinning.ok()) << spinning.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const pid_t first_worker = the_one_worker(d_->pid());

  Tenant hostile = ready_tenant(d_->tcp_uri(), "hostile");
  ASSERT_NE(hostile.client, nullptr);
  auto m = hostile.client->load_module(kNullStore);
  ASSERT_TRUE(m.ok()) << m.status();
  auto k = hostile.client->get_kernel(*m, {.entry = "hostile", .args = {ArgSpec::buffer()}});
  ASSERT_TRUE(k.ok()) << k.status();
  const Arg args[] = {Arg::buffer(hostile.buffer)};
  absl::Status crashed = hostile.queue->launch(*k, client::Dims{4}, nullptr, args).status();
  if (crashed.ok()) crashed = hostile.queue->wait();
  EXPECT_EQ(crashed.code(), absl::StatusCode::kAborted) << crashed;
  EXPECT_THAT(crashed.message(),
              AllOf(HasSubstr("the device's worker"), HasSubstr("signal 11"),
                    HasSubstr("while running kernel `hostile` (launch 1) of this queue")));

  // The bystander's spin was in the same worker: lost, and said so, with
  // the cause another session's kernel, which it is not told the name of.
  const absl::Status lost = bystander.queue->wait();
  EXPECT_EQ(lost.code(), absl::StatusCode::kAborted) << lost;
  EXPECT_THAT(lost.message(), AllOf(HasSubstr("the device's worker"), HasSubstr("signal 11"),
                                    HasSubstr("while running another session's kernel"),
                                    HasSubstr("launch 3 was lost"), HasSubstr("kernel `spin`")));
  EXPECT_THAT(lost.message(), ::testing::Not(HasSubstr("hostile")));
  // Its buffer lives in kad's memory: intact. Both sessions go on, in one new worker.
  std::vector<int32_t> got(1024);
  ASSERT_TRUE(bystander.queue->read(bystander.buffer, 0, testing::bytes_of(got)).ok());
  EXPECT_EQ(got, std::vector<int32_t>(1024, 7));
  expect_fill(bystander, 8);
  expect_fill(hostile, 9);
  const pid_t second_worker = the_one_worker(d_->pid());
  EXPECT_NE(second_worker, first_worker);
  EXPECT_EQ(kill(first_worker, 0), -1) << "the crashed worker is reaped";

  const client::ServiceStatus after = status_of(*observer_);
  EXPECT_EQ(after.workers_crashed, before.workers_crashed + 1);
  EXPECT_EQ(after.workers_running, 1u);
  EXPECT_THAT(d_->log(), HasSubstr("the device's worker"));
  testing::expect_bystander_served(d_->unix_uri(), 41);
}

TEST_F(DeviceWorker, ASessionThatClosesWithLaunchesInProgressLeavesTheWorkerToTheOthers) {
  ASSERT_NO_FATAL_FAILURE(start());
  Tenant stays = ready_tenant(d_->unix_uri(), "stays");
  ASSERT_NE(stays.client, nullptr);
  expect_fill(stays, 1);
  const pid_t worker = the_one_worker(d_->pid());
  {
    // Launches over a buffer of its own, not waited for, as its client goes.
    Tenant leaves = ready_tenant(d_->tcp_uri(), "leaves");
    ASSERT_NE(leaves.client, nullptr);
    auto big = leaves.client->allocate(size_t{4} << 20);
    ASSERT_TRUE(big.ok()) << big.status();
    const Arg args[] = {Arg::buffer(*big), Arg::scalar<int32_t>(5)};
    for (int i = 0; i < 32; ++i)
      ASSERT_TRUE(leaves.queue->launch(leaves.fill, client::Dims{1 << 20}, nullptr, args).ok());
  }
  // The observer and `stays`, with its buffer and queue.
  const client::ServiceStatus back = testing::status_back_to(*observer_, holding(2, 1, 1));
  EXPECT_EQ(back.sessions, 2u);
  for (int32_t v = 2; v < 6; ++v) expect_fill(stays, v);
  EXPECT_EQ(the_one_worker(d_->pid()), worker) << "the closed session's launches ended the worker";
  const client::ServiceStatus after = status_of(*observer_);
  EXPECT_EQ(after.workers_crashed, 0u);
  EXPECT_EQ(after.workers_timed_out, 0u);
  EXPECT_EQ(after.buffers, 1u);
}

// A closed session's launches still hold the worker every session shares:
// kad waits for them as for any launch, to its deadline, and then stops
// the worker, so that a kernel nobody waits for cannot keep it for good.
TEST_F(DeviceWorker, AKernelThatAClosedSessionLeftSpinningIsStoppedAtItsDeadline) {
  ASSERT_NO_FATAL_FAILURE(start({"--launch-timeout", "2"}));
  Tenant stays = ready_tenant(d_->unix_uri(), "stays");
  ASSERT_NE(stays.client, nullptr);
  expect_fill(stays, 1);
  const pid_t worker = the_one_worker(d_->pid());
  {
    auto leaves = Client::connect(d_->tcp_uri(), "leaves");
    ASSERT_TRUE(leaves.ok()) << leaves.status();
    auto q = (*leaves)->create_queue();
    auto flag = (*leaves)->allocate(sizeof(int32_t));
    auto m = (*leaves)->load_module(kSpin);
    ASSERT_TRUE(q.ok() && flag.ok() && m.ok());
    auto spin = (*leaves)->get_kernel(*m, {.entry = "spin", .args = {ArgSpec::buffer()}});
    ASSERT_TRUE(spin.ok()) << spin.status();
    const Arg args[] = {Arg::buffer(*flag)};
    ASSERT_TRUE((*q)->launch(*spin, client::Dims{1}, nullptr, args).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }  // its client goes, the kernel spinning
  client::ServiceStatus now;
  for (const auto give_up = Clock::now() + std::chrono::seconds(30);
       Clock::now() < give_up && now.workers_timed_out == 0;
       std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    now = status_of(*observer_);
  EXPECT_EQ(now.workers_timed_out, 1u) << "the spinning kernel still holds the worker";
  EXPECT_EQ(now.workers_crashed, 0u);
  EXPECT_EQ(now.sessions, 2u);
  // The session that stayed had nothing in progress: nothing to be told,
  // and its next launch runs in a new worker.
  expect_fill(stays, 2);
  EXPECT_NE(the_one_worker(d_->pid()), worker);
  EXPECT_THAT(d_->log(),
              AllOf(HasSubstr("the device's worker"), HasSubstr("a launch ran past its deadline")));
}

}  // namespace
}  // namespace kad
