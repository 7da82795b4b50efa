// Issue 11 (DESIGN §8): client kernels run in worker processes, one per
// session on a CPU device. A kernel that crashes its worker — a NULL store,
// a far out-of-bounds write, __builtin_trap() — costs its own session the
// launches its worker held (ABORTED, naming the kernel and the signal), and
// nothing else: another session's kernel runs at the same time and after,
// with correct results; the crashed session's buffers keep their data and
// its next launch runs in a new worker; the daemon is the same process; and
// kad's counters go back to where they were.
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "tests/e2e/e2e.h"
#include "tests/support/worker_process.h"

namespace kad {
namespace {

using client::Arg;
using client::ArgSpec;
using ::testing::AllOf;
using ::testing::HasSubstr;

struct Hostile {
  const char* name;
  const char* source;  // kernel `hostile(KAD_CONTEXT, global int* out)`
  const char* signal;  // how its worker ends
};

const Hostile kHostile[] = {
    {"NullStore",
     "kernel void hostile(KAD_CONTEXT, global int* out) {\n"
     "  if (kad_active()) *(global volatile int*)0 = 1;\n}\n",
     "signal 11"},
    {"FarOutOfBoundsWrite",
     "kernel void hostile(KAD_CONTEXT, global int* out) {\n"
     "  if (kad_active()) ((global volatile int*)out)[(long)1 << 40] = 1;\n}\n",
     "signal 11"},
    {"BuiltinTrap",
     "kernel void hostile(KAD_CONTEXT, global int* out) {\n"
     "  if (kad_active()) __builtin_trap();\n}\n",
     "signal 4"},
};

// A session whose fill kernel, queue and buffer are ready before the
// hostile one strikes.
struct Bystander {
  std::unique_ptr<Client> client;
  std::unique_ptr<client::Queue> queue;
  client::Buffer buffer;
  client::Kernel fill;
};

Bystander ready_bystander(const std::string& uri) {
  Bystander b;
  auto c = Client::connect(uri, "bystander");
  EXPECT_TRUE(c.ok()) << c.status();
  b.client = *std::move(c);
  auto q = b.client->create_queue();
  auto buf = b.client->allocate(1024 * sizeof(int32_t));
  auto m = b.client->load_module(testing::kFillSource);
  EXPECT_TRUE(q.ok() && buf.ok() && m.ok());
  auto k = b.client->get_kernel(
      *m,
      {.entry = "fill", .args = {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kI32)}});
  EXPECT_TRUE(k.ok()) << k.status();
  b.queue = *std::move(q);
  b.buffer = *buf;
  b.fill = *k;
  return b;
}

void expect_fill(client::Queue& q, const client::Kernel& fill, const client::Buffer& buffer,
                 int32_t value) {
  const Arg args[] = {Arg::buffer(buffer), Arg::scalar<int32_t>(value)};
  absl::Status s = q.launch(fill, client::Dims{1024}, nullptr, args).status();
  ASSERT_TRUE(s.ok()) << s;
  s = q.wait();
  ASSERT_TRUE(s.ok()) << s;
  std::vector<int32_t> got(1024);
  s = q.read(buffer, 0, testing::bytes_of(got));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(got, std::vector<int32_t>(1024, value));
}

class WorkerIsolation : public testing::DaemonSuite,
                        public ::testing::WithParamInterface<std::tuple<Hostile, bool>> {};

TEST_P(WorkerIsolation, ACrashingKernelCostsOnlyItsOwnSessionsLaunches) {
  const auto& [hostile, over_tcp] = GetParam();
  const std::string uri = over_tcp ? daemon().tcp_uri() : daemon().unix_uri();
  auto observer = connect(daemon().tcp_uri(), "observer");
  ASSERT_NE(observer, nullptr);
  // The baseline: the observer alone (the last test's sessions close as
  // their clients go, which kad learns a moment later).
  absl::StatusOr<client::ServiceStatus> before;
  for (int i = 0; i < 250; ++i) {
    before = observer->status();
    ASSERT_TRUE(before.ok()) << before.status();
    if (before->sessions == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(before->sessions, 1u);
  {
    Bystander bystander = ready_bystander(over_tcp ? daemon().unix_uri() : daemon().tcp_uri());
    ASSERT_NE(bystander.client, nullptr);
    // The bystander works before, during and after the crash.
    std::atomic<bool> stop{false};
    std::atomic<int> rounds{0};
    std::thread busy([&] {
      for (int32_t v = 1; !stop.load(); ++v) {
        expect_fill(*bystander.queue, bystander.fill, bystander.buffer, v);
        rounds.fetch_add(1);
      }
    });
    absl::Cleanup join = [&] {
      stop.store(true);
      busy.join();
    };

    auto c = connect(uri, "hostile");
    ASSERT_NE(c, nullptr);
    auto q = c->create_queue();
    auto kept = c->allocate(1024 * sizeof(int32_t));
    auto fill_module = c->load_module(testing::kFillSource);
    auto m = c->load_module(hostile.source);
    ASSERT_TRUE(q.ok() && kept.ok() && fill_module.ok() && m.ok()) << m.status();
    auto fill = c->get_kernel(
        *fill_module, {.entry = "fill",
                       .args = {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kI32)}});
    auto k = c->get_kernel(*m, {.entry = "hostile", .args = {ArgSpec::buffer()}});
    ASSERT_TRUE(fill.ok() && k.ok()) << k.status();
    expect_fill(**q, *fill, *kept, 5);

    const Arg args[] = {Arg::buffer(*kept)};
    absl::Status crashed = (*q)->launch(*k, client::Dims{4}, nullptr, args).status();
    if (crashed.ok()) crashed = (*q)->wait();
    EXPECT_EQ(crashed.code(), absl::StatusCode::kAborted) << crashed;
    EXPECT_THAT(crashed.message(),
                AllOf(HasSubstr("while running kernel `hostile` (launch 2) of this queue"),
                      HasSubstr(hostile.signal), HasSubstr("launch 2 was lost"),
                      HasSubstr("the session's worker")));

    // Its buffers live in the daemon's memory: still there, data intact.
    std::vector<int32_t> got(1024);
    ASSERT_TRUE((*q)->read(*kept, 0, testing::bytes_of(got)).ok());
    EXPECT_EQ(got, std::vector<int32_t>(1024, 5));
    // And its next launch runs, in a new worker.
    expect_fill(**q, *fill, *kept, 6);

    // The bystander went on through the crash: two more rounds, checked.
    const int seen = rounds.load();
    while (rounds.load() < seen + 2 && !::testing::Test::HasFailure())
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_GE(rounds.load(), seen + 2);
  }
  testing::expect_bystander_served(daemon().unix_uri(), 41);
  testing::expect_bystander_served(daemon().tcp_uri(), 42);

  // Sessions end when their clients go: kad's counters come back.
  const client::ServiceStatus after = testing::status_back_to(*observer, *before);
  EXPECT_EQ(after.sessions, before->sessions);
  EXPECT_EQ(after.buffers, before->buffers);
  EXPECT_EQ(after.queues, before->queues);
  EXPECT_EQ(after.kernels, before->kernels);
  EXPECT_EQ(after.queue_depth, before->queue_depth);
  // One worker ended by the kernel; the sessions' workers went with them
  // (what runs is the spare kad keeps).
  EXPECT_EQ(after.workers_crashed, before->workers_crashed + 1);
  EXPECT_EQ(after.workers_timed_out, before->workers_timed_out);
  EXPECT_LE(after.workers_running, 1u);
  EXPECT_GT(after.workers_started, before->workers_started);
  EXPECT_THAT(daemon().log(), HasSubstr("a session's worker"));
  EXPECT_THAT(daemon().log(), HasSubstr("while running kernel `hostile` (launch 2 of its queue)"));
  EXPECT_EQ(kill(daemon().pid(), 0), 0) << "the daemon itself is gone";
}

// A session's worker runs each of its queues' long launches on a thread of
// the queue's own: when one queue's kernel faults while another's runs, the
// loss that each queue is told of names the launch that faulted
// (fault_witness.h), not the queue's own launch that merely ran beside it.
TEST_F(WorkerIsolation, EveryQueueOfTheSessionIsToldWhichLaunchFaulted) {
  constexpr char kSpin[] =
      "kernel void spin(KAD_CONTEXT, global volatile int* flag) {\n"
      "  if (kad_active()) { while (flag[0] == 0) { } }\n}\n";
  auto c = connect(daemon().unix_uri(), "two-queues");
  ASSERT_NE(c, nullptr);
  auto spinning = c->create_queue();
  auto faulting = c->create_queue();
  auto flags = c->create_queue();  // writes the flag while spin runs
  auto flag = c->allocate(sizeof(int32_t));
  auto out = c->allocate(16 * sizeof(int32_t));
  auto spin_module = c->load_module(kSpin);
  auto hostile_module = c->load_module(kHostile[0].source);
  ASSERT_TRUE(spinning.ok() && faulting.ok() && flags.ok() && flag.ok() && out.ok() &&
              spin_module.ok() && hostile_module.ok());
  auto spin = c->get_kernel(*spin_module, {.entry = "spin", .args = {ArgSpec::buffer()}});
  auto hostile = c->get_kernel(*hostile_module, {.entry = "hostile", .args = {ArgSpec::buffer()}});
  ASSERT_TRUE(spin.ok() && hostile.ok());
  auto set_flag = [&](int32_t v) {
    ASSERT_TRUE((*flags)->write(*flag, 0, std::as_bytes(std::span(&v, 1))).ok());
  };
  const Arg spin_args[] = {Arg::buffer(*flag)};
  // A first launch that runs long sends the kernel's later launches to the
  // queue's own thread; then one that spins until the worker goes.
  set_flag(0);
  ASSERT_TRUE((*spinning)->launch(*spin, client::Dims{1}, nullptr, spin_args).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  set_flag(1);
  ASSERT_TRUE((*spinning)->wait().ok());
  set_flag(0);
  ASSERT_TRUE((*spinning)->launch(*spin, client::Dims{1}, nullptr, spin_args).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));

  const Arg hostile_args[] = {Arg::buffer(*out)};
  absl::Status crashed =
      (*faulting)->launch(*hostile, client::Dims{4}, nullptr, hostile_args).status();
  if (crashed.ok()) crashed = (*faulting)->wait();
  EXPECT_EQ(crashed.code(), absl::StatusCode::kAborted) << crashed;
  EXPECT_THAT(crashed.message(),
              AllOf(HasSubstr("signal 11"),
                    HasSubstr("while running kernel `hostile` (launch 1) of this queue"),
                    HasSubstr("launch 1 was lost")));
  const absl::Status lost = (*spinning)->wait();
  EXPECT_EQ(lost.code(), absl::StatusCode::kAborted) << lost;
  EXPECT_THAT(lost.message(),
              AllOf(HasSubstr("signal 11"),
                    HasSubstr("while running kernel `hostile` (launch 1) of another of the "
                              "session's queues"),
                    HasSubstr("launch 2 was lost, the first of them kernel `spin`")));
  // The session goes on, in a new worker.
  set_flag(1);
  ASSERT_TRUE((*spinning)->launch(*spin, client::Dims{1}, nullptr, spin_args).ok());
  EXPECT_TRUE((*spinning)->wait().ok());
}

INSTANTIATE_TEST_SUITE_P(Kernels, WorkerIsolation,
                         ::testing::Combine(::testing::ValuesIn(kHostile), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) +
                                  (std::get<1>(info.param) ? "OverTcp" : "OverSharedMemory");
                         });

// A session cannot read another's memory even by its address: each worker
// maps only its own session's buffers. Session A's kernel reports where A's
// buffer (holding a secret) lies; session B's kernel loads from that address
// in its own worker, where it is unmapped (a crash of B's worker) or B's own
// memory — never A's secret, which a kernel in the daemon's process read.
TEST_F(WorkerIsolation, AKernelCannotReadAnotherSessionsBufferByItsAddress) {
  constexpr int64_t kSecret = 0x5EC12E75EC12E7;
  constexpr char kWhere[] =
      "kernel void where(KAD_CONTEXT, global long* out, global long* secret) {\n"
      "  if (kad_global_linear() == 0) { secret[0] = 0x5EC12E75EC12E7L; out[0] = (long)secret; "
      "}\n}\n";
  constexpr char kPeek[] =
      "kernel void peek(KAD_CONTEXT, global long* out, long address) {\n"
      "  if (kad_global_linear() == 0) out[0] = *(global volatile long*)address;\n}\n";
  auto a = connect(daemon().unix_uri(), "a");
  auto b = connect(daemon().unix_uri(), "b");
  ASSERT_TRUE(a && b);

  auto qa = a->create_queue();
  auto out_a = a->allocate(sizeof(int64_t));
  auto secret = a->allocate(sizeof(int64_t));
  auto ma = a->load_module(kWhere);
  ASSERT_TRUE(qa.ok() && out_a.ok() && secret.ok() && ma.ok()) << ma.status();
  auto where =
      a->get_kernel(*ma, {.entry = "where", .args = {ArgSpec::buffer(), ArgSpec::buffer()}});
  ASSERT_TRUE(where.ok()) << where.status();
  const Arg where_args[] = {Arg::buffer(*out_a), Arg::buffer(*secret)};
  ASSERT_TRUE((*qa)->launch(*where, client::Dims{1}, nullptr, where_args).ok());
  int64_t address = 0;
  ASSERT_TRUE((*qa)->read(*out_a, 0, std::as_writable_bytes(std::span(&address, 1))).ok());
  ASSERT_NE(address, 0);

  auto qb = b->create_queue();
  auto out_b = b->allocate(sizeof(int64_t));
  auto mb = b->load_module(kPeek);
  ASSERT_TRUE(qb.ok() && out_b.ok() && mb.ok()) << mb.status();
  auto peek = b->get_kernel(
      *mb,
      {.entry = "peek", .args = {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kI64)}});
  ASSERT_TRUE(peek.ok()) << peek.status();
  const Arg peek_args[] = {Arg::buffer(*out_b), Arg::scalar<int64_t>(address)};
  absl::Status peeked = (*qb)->launch(*peek, client::Dims{1}, nullptr, peek_args).status();
  if (peeked.ok()) peeked = (*qb)->wait();
  if (peeked.ok()) {
    int64_t seen = 0;
    ASSERT_TRUE((*qb)->read(*out_b, 0, std::as_writable_bytes(std::span(&seen, 1))).ok());
    EXPECT_NE(seen, kSecret) << "session b read session a's buffer";
  } else {
    EXPECT_EQ(peeked.code(), absl::StatusCode::kAborted) << peeked;
  }
  // A's memory is untouched either way.
  int64_t kept = 0;
  ASSERT_TRUE((*qa)->read(*secret, 0, std::as_writable_bytes(std::span(&kept, 1))).ok());
  EXPECT_EQ(kept, kSecret);
}

// A session whose request waits on its worker (here: a worker stopped by
// SIGSTOP, as a taken-over one might withhold its answer to a kernel load)
// holds its own requests up, and no one else's: GetStatus answers at once,
// another session launches, and SIGTERM exits within --drain-timeout.
TEST(WorkerIsolationStuck, AWorkerThatDoesNotAnswerHoldsUpNoOneElse) {
  auto d = testing::Daemon::start({"--worker-spares", "0", "--drain-timeout", "2"});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string uri = (*d)->unix_uri();
  auto stuck = Client::connect(uri, "stuck");
  ASSERT_TRUE(stuck.ok()) << stuck.status();
  auto q = (*stuck)->create_queue();
  auto out = (*stuck)->allocate(1024 * sizeof(int32_t));
  auto m = (*stuck)->load_module(testing::kFillSource);
  ASSERT_TRUE(q.ok() && out.ok() && m.ok());
  const client::KernelSpec fill_spec{
      .entry = "fill", .args = {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kI32)}};
  auto fill = (*stuck)->get_kernel(*m, fill_spec);
  ASSERT_TRUE(fill.ok()) << fill.status();
  expect_fill(**q, *fill, *out, 1);
  std::vector<pid_t> workers = testing::children_of((*d)->pid());
  ASSERT_EQ(workers.size(), 1u) << "the session's worker alone";
  const pid_t worker = workers[0];
  ASSERT_EQ(kill(worker, SIGSTOP), 0);
  absl::Cleanup resume = [worker] { kill(worker, SIGKILL); };

  // A kernel its worker has not loaded: the launch waits on the worker.
  auto m2 = (*stuck)->load_module(std::string(testing::kFillSource) + "// another\n");
  ASSERT_TRUE(m2.ok());
  auto fill2 = (*stuck)->get_kernel(*m2, fill_spec);
  ASSERT_TRUE(fill2.ok()) << fill2.status();
  std::thread waiting([&] {
    const Arg args[] = {Arg::buffer(*out), Arg::scalar<int32_t>(2)};
    (void)(*q)->launch(*fill2, client::Dims{1024}, nullptr, args);
  });
  absl::Cleanup join = [&] { waiting.join(); };
  // Until the launch has compiled and waits on the worker, holding its
  // session; every look answers at once meanwhile.
  auto other = Client::connect(uri, "other");
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<client::ServiceStatus> status;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  do {
    const auto asked = std::chrono::steady_clock::now();
    status = (*other)->status();
    EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(2))
        << "GetStatus waited on another session's worker";
    ASSERT_TRUE(status.ok()) << status.status();
  } while (status->sessions_busy == 0 && std::chrono::steady_clock::now() < give_up);
  EXPECT_EQ(status->sessions_busy, 1u);
  testing::expect_bystander_served(uri, 5);

  const auto stopping = std::chrono::steady_clock::now();
  EXPECT_EQ((*d)->stop(SIGTERM), 0) << (*d)->log();
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(10))
      << "SIGTERM waited on a worker that does not answer";
}

// A worker kad started (a spare, with --worker-spares), waiting up to 10 s;
// its NSpid line in `nspid`. 0 when there is none.
pid_t spare_worker_of(const testing::Daemon& d, std::string* nspid) {
  for (int i = 0; i < 1000; ++i) {
    for (pid_t child : testing::children_of(d.pid())) {
      const std::string status = testing::read_proc_file(absl::StrCat("/proc/", child, "/status"));
      const size_t at = status.find("NSpid:");
      if (at == std::string::npos) continue;
      *nspid = status.substr(at, status.find('\n', at) - at);
      return child;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

// The walls kad's workers hold, as `kactl status` shows them (waiting for
// the first worker's report).
std::string workers_walls(const testing::Daemon& d) {
  auto c = Client::connect(d.unix_uri(), "walls");
  if (!c.ok()) return c.status().ToString();
  absl::StatusOr<client::ServiceStatus> status = (*c)->status();
  for (int i = 0; i < 500 && status.ok() && status->workers_walls.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    status = (*c)->status();
  }
  return status.ok() ? status->workers_walls : status.status().ToString();
}

// Whether `walls` (describe_walls) names `wall` among those held.
bool holds_wall(const std::string& walls, const std::string& wall) {
  const size_t at = walls.find(wall), missing = walls.find("not:");
  return at != std::string::npos && (missing == std::string::npos || at < missing);
}

// The real uid of process `pid` (the first of /proc/PID/status's "Uid:"
// line); -1 when it cannot be read.
int64_t real_uid_of(pid_t pid) {
  const std::string status = testing::read_proc_file(absl::StrCat("/proc/", pid, "/status"));
  const size_t at = status.find("Uid:\t");
  int64_t uid = -1;
  if (at == std::string::npos ||
      !absl::SimpleAtoi(status.substr(at + 5, status.find('\t', at + 5) - at - 5), &uid))
    return -1;
  return uid;
}

// A worker's threads and processes are bounded (--worker-max-processes),
// so that a kernel that takes its worker over cannot fork-bomb the machine
// (the bound itself: NamespacedSpawn.AWorkersProcessLimitStopsAForkBomb...).
// Linux holds root to no such bound, so under a root kad each worker runs
// as a uid of its own (--worker-uid-base); with 0 it runs as root, and kad
// says in its log and in the walls it reports that the bound does not hold.
TEST(WorkerProcessLimit, KadStartsItsWorkersWithTheLimitItWasGivenAndSaysWhenItCannotHold) {
  constexpr int64_t kBase = 0x70000000;
  for (const int64_t base : {kBase, int64_t{0}}) {
    SCOPED_TRACE(base);
    auto d = testing::Daemon::start({"--worker-max-processes", "48", "--worker-spares", "1",
                                     "--worker-uid-base", absl::StrCat(base)});
    ASSERT_TRUE(d.ok()) << d.status();
    std::string nspid;
    const pid_t spare = spare_worker_of(**d, &nspid);
    ASSERT_NE(spare, 0) << "kad started no spare worker: " << (*d)->log();
    // Two pids (kad's view and its own): a worker in its own namespaces,
    // where the limit counts its own processes alone.
    const bool namespaced = std::count(nspid.begin(), nspid.end(), '\t') == 2;
    const std::string limits = testing::read_proc_file(absl::StrCat("/proc/", spare, "/limits"));
    if (namespaced) {
      EXPECT_THAT(limits, ::testing::ContainsRegex("Max processes +48 +48 ")) << limits;
    }
    const bool root = getuid() == 0;
    const bool own_uid = root && base != 0 && namespaced;
    const int64_t uid = real_uid_of(spare);
    if (own_uid) {
      EXPECT_GE(uid, base);
      EXPECT_LT(uid, base + 65536);
    } else {
      EXPECT_EQ(uid, static_cast<int64_t>(getuid()));
    }

    const std::string walls = workers_walls(**d);
    EXPECT_EQ(holds_wall(walls, "process limit"), namespaced && (!root || own_uid)) << walls;
    EXPECT_EQ(absl::StrContains((*d)->log(), "kad's workers run as root: Linux holds no process"),
              root && base == 0)
        << (*d)->log();
  }
}

// Under a root kad, every worker runs as a uid no other worker has (so it
// can neither signal nor read another's files), and kernels build and run
// there as they do under kad's own uid.
TEST(WorkerUids, EachSessionsWorkerRunsAsAUidOfItsOwnUnderRoot) {
  if (getuid() != 0) GTEST_SKIP() << "workers take uids of their own only under a root kad";
  auto d = testing::Daemon::start({"--worker-spares", "1"});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string uri = (*d)->unix_uri();
  std::vector<std::unique_ptr<Client>> sessions;
  for (int i = 0; i < 2; ++i) {
    auto c = Client::connect(uri, absl::StrCat("session ", i));
    ASSERT_TRUE(c.ok()) << c.status();
    auto q = (*c)->create_queue();
    auto out = (*c)->allocate(1024 * sizeof(int32_t));
    auto m = (*c)->load_module(testing::kFillSource);
    ASSERT_TRUE(q.ok() && out.ok() && m.ok());
    auto fill = (*c)->get_kernel(
        *m, {.entry = "fill",
             .args = {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kI32)}});
    ASSERT_TRUE(fill.ok()) << fill.status();
    expect_fill(**q, *fill, *out, 40 + i);
    sessions.push_back(*std::move(c));
  }
  // Two sessions' workers and a spare, each in its own PID namespace.
  absl::flat_hash_set<int64_t> uids;
  std::vector<pid_t> workers;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    workers = testing::children_of((*d)->pid());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (workers.size() < 3 && std::chrono::steady_clock::now() < give_up);
  ASSERT_GE(workers.size(), 3u) << "two sessions' workers and a spare";
  for (pid_t worker : workers) {
    const int64_t uid = real_uid_of(worker);
    EXPECT_GE(uid, int64_t{0x7A000000}) << "worker " << worker;
    EXPECT_LT(uid, int64_t{0x7A000000} + 65536) << "worker " << worker;
    uids.insert(uid);
    // It owns its folder, where its driver keeps what it built.
    struct stat folder {};
    ASSERT_EQ(stat(testing::worker_folder_inside(worker).c_str(), &folder), 0);
    EXPECT_EQ(static_cast<int64_t>(folder.st_uid), uid);
  }
  EXPECT_EQ(uids.size(), workers.size()) << "two workers share a uid";
  testing::expect_bystander_served(uri, 9);
}

// A range that holds a user or group of the machine is not used: a worker
// would be that user to the kernel. kad says why and runs workers as root.
TEST(WorkerUids, ARangeHoldingAUserOfTheMachineIsNotUsed) {
  if (getuid() != 0) GTEST_SKIP() << "workers take uids of their own only under a root kad";
  auto d = testing::Daemon::start({"--worker-spares", "1", "--worker-uid-base", "65534"});
  ASSERT_TRUE(d.ok()) << d.status();
  std::string nspid;
  const pid_t spare = spare_worker_of(**d, &nspid);
  ASSERT_NE(spare, 0) << "kad started no spare worker: " << (*d)->log();
  EXPECT_EQ(real_uid_of(spare), 0);
  EXPECT_THAT((*d)->log(), HasSubstr("workers run as root: user nobody has id 65534, within the "
                                     "workers' uids 65534 to 131069 (--worker-uid-base)"));
}

// A worker's folder (its only writable one) is a tmpfs of its own of
// --worker-max-folder-bytes, and the memory it allocates for itself is
// bounded by --worker-max-memory (the bounds themselves:
// NamespacedSpawn.AWorkersFolderHoldsNoMoreThanItsBound...,
// ...AWorkersMemoryLimitRefuses...); with 0 there is none, and kad says the
// walls are missing.
TEST(WorkerResources, KadBoundsEachWorkersFolderAndMemoryAsToldAndSaysWhenItDoesNot) {
  for (const char* bytes : {"4194304", "0"}) {
    SCOPED_TRACE(bytes);
    const std::string memory = std::string(bytes) == "0" ? "0" : "1073741824";
    auto d = testing::Daemon::start({"--worker-max-folder-bytes", bytes, "--worker-max-memory",
                                     memory, "--worker-spares", "1"});
    ASSERT_TRUE(d.ok()) << d.status();
    std::string nspid;
    const pid_t spare = spare_worker_of(**d, &nspid);
    ASSERT_NE(spare, 0) << "kad started no spare worker: " << (*d)->log();
    const bool namespaced = std::count(nspid.begin(), nspid.end(), '\t') == 2;
    const std::string walls = workers_walls(**d);
    const bool bounded = namespaced && std::string(bytes) != "0";
    EXPECT_EQ(holds_wall(walls, "folder size"), bounded) << walls;
    struct statvfs fs {};
    ASSERT_EQ(statvfs(testing::worker_folder_inside(spare).c_str(), &fs), 0);
    if (bounded) {
      EXPECT_EQ(fs.f_blocks * fs.f_frsize, 4194304u);
    }
    EXPECT_EQ(holds_wall(walls, "memory limit"), bounded) << walls;
    const std::string limits = testing::read_proc_file(absl::StrCat("/proc/", spare, "/limits"));
    if (bounded) {
      EXPECT_THAT(limits, ::testing::ContainsRegex("Max data size +1073741824 +1073741824 "))
          << limits;
    }
  }
}

}  // namespace
}  // namespace kad
