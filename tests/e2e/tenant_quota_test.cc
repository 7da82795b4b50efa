// DESIGN §8, tenants and quotas: the config's [tenants.NAME] tables give
// each tenant its quotas; a bearer token, a client certificate or a UNIX
// peer's uid says which tenant a caller is. One more than a quota is
// RESOURCE_EXHAUSTED naming the quota, the tenant, the use, the amount asked
// and the limit; `kactl status` (GetStatus) shows each tenant's use, back at
// zero once its sessions end; and a tenant that asks for thousands of
// modules, streams or channels leaves another tenant's launches running.
// Real kad, real PoCL, real sockets.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kad/client.h"
#include "kad/shm/v1/layout.h"
#include "server/engine.h"
#include "server/scheduled_queue.h"
#include "server/worker/cpu_groups.h"
#include "tests/e2e/e2e.h"
#include "tests/support/daemon.h"
#include "tests/support/worker_process.h"

namespace kad::testing {
namespace {

constexpr char kGreedyToken[] = "greedy-token-0123456789abcdef";
constexpr char kCalmToken[] = "calm-token-0123456789abcdef";

class TenantQuotas : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/kad-tenants-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    std::ofstream(dir_ + "/tokens") << kGreedyToken << " greedy\n" << kCalmToken << " calm\n";
    // `local` is whoever runs this test, on the UNIX socket.
    std::ofstream(dir_ + "/kad.toml") << "[tenants.greedy]\n"
                                         "weight = 2\n"
                                         "priority = 1\n"
                                         "sessions = 3\n"
                                         "device_memory_bytes = 65536\n"
                                         "queues = 2000\n"
                                         "streams = 4\n"
                                         "module_bytes = 4096\n"
                                         "kernels = 3\n"
                                         "launches_in_flight = 8\n"
                                         "[tenants.local]\n"
                                      << "uids = [" << getuid() << "]\n"
                                      << "queues = 2000\n"
                                         "channels = 5\n";
    auto d = Daemon::start(
        {"--no-workers", "--tokens", dir_ + "/tokens", "--config", dir_ + "/kad.toml"});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
  }
  void TearDown() override {
    daemon_.reset();
    std::filesystem::remove_all(dir_);
  }

  static client::ConnectOptions token(const char* t) {
    client::ConnectOptions options;
    options.token = t;
    return options;
  }
  std::unique_ptr<Client> greedy(const std::string& name = "greedy") const {
    auto c = Client::connect(daemon_->tcp_uri(), name, token(kGreedyToken));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // What `tenant` uses of `quota`, as kad's operator (this test's user on
  // the UNIX socket) sees it; -1 when GetStatus does not show it.
  int64_t used(const std::string& tenant, const std::string& quota) const {
    auto observer = Client::connect(daemon_->unix_uri(), "observer");
    if (!observer.ok()) return -1;
    auto status = (*observer)->status();
    if (!status.ok()) return -1;
    for (const auto& t : status->tenants) {
      if (t.name != tenant) continue;
      for (const auto& q : t.quotas)
        if (q.quota == quota) return static_cast<int64_t>(q.used);
    }
    return -1;
  }
  // Polls (5 s at most) until `tenant` uses nothing of any quota (but the
  // session that asks, for `local`, the observer's own tenant).
  bool tenant_back_to_zero(const std::string& tenant) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
      bool zero = true;
      for (const char* q : {"sessions", "device_memory_bytes", "queues", "streams", "channels",
                            "module_bytes", "kernels", "launches_in_flight"}) {
        const int64_t own = tenant == "local" && std::string(q) == "sessions" ? 1 : 0;
        zero = zero && used(tenant, q) == own;
      }
      if (zero) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  std::string dir_;
  std::unique_ptr<Daemon> daemon_;
};

// The message of a refusal: the tenant, the quota, the use, the amount and
// the limit, and the setting to change.
void expect_refused(const absl::Status& s, const std::string& expected) {
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), expected)) << s.message();
}

TEST_F(TenantQuotas, EveryQuotaRefusesOneMoreWithTheTenantTheUseAndTheLimit) {
  {
    // Sessions: three, then one more is refused.
    std::vector<std::unique_ptr<Client>> sessions;
    for (int i = 0; i < 3; ++i) sessions.push_back(greedy());
    ASSERT_EQ(used("greedy", "sessions"), 3);
    auto fourth = Client::connect(daemon_->tcp_uri(), "fourth", token(kGreedyToken));
    expect_refused(fourth.status(),
                   "tenant `greedy` is at its quota of sessions: 3 in use, 1 more asked, limit 3 "
                   "(tenants.greedy.sessions)");
  }
  ASSERT_TRUE(tenant_back_to_zero("greedy"));

  auto c = greedy();
  ASSERT_NE(c, nullptr);
  // Device memory, per device.
  auto big = c->allocate(60000);
  ASSERT_TRUE(big.ok()) << big.status();
  expect_refused(c->allocate(8192).status(),
                 "tenant `greedy` is at its quota of bytes of device memory on opencl:pocl:0: "
                 "60000 in use, 8192 more asked, limit 65536 "
                 "(tenants.greedy.device_memory_bytes)");
  ASSERT_TRUE(c->free(*big).ok());
  EXPECT_EQ(used("greedy", "device_memory_bytes"), 0);
  auto buffer = c->allocate(16 * sizeof(int32_t));
  ASSERT_TRUE(buffer.ok()) << buffer.status();

  // Module bytes.
  const std::string padding(4096 - std::string(kFillSource).size() - 100, ' ');
  auto module = c->load_module(absl::StrCat(kFillSource, "//", padding, "\n"));
  ASSERT_TRUE(module.ok()) << module.status();
  const int64_t module_bytes = used("greedy", "module_bytes");
  EXPECT_GT(module_bytes, 3900);
  expect_refused(c->load_module(kFillSource).status(),
                 absl::StrCat("tenant `greedy` is at its quota of bytes of modules: ", module_bytes,
                              " in use, ", std::string(kFillSource).size(),
                              " more asked, limit 4096 (tenants.greedy.module_bytes)"));

  // Kernels.
  const client::KernelSpec fill{
      .entry = "fill",
      .args = {client::ArgSpec::buffer(), client::ArgSpec::scalar_of(client::ScalarType::kI32)}};
  std::vector<client::Kernel> kernels;
  for (int i = 0; i < 3; ++i) {
    auto k = c->get_kernel(*module, fill);
    ASSERT_TRUE(k.ok()) << k.status();
    kernels.push_back(*k);
  }
  expect_refused(c->get_kernel(*module, fill).status(),
                 "tenant `greedy` is at its quota of kernels: 3 in use, 1 more asked, limit 3 "
                 "(tenants.greedy.kernels)");

  // Launches in flight: eight launches not yet waited for, then a refusal;
  // a wait gives them back.
  auto queue = c->create_queue();
  ASSERT_TRUE(queue.ok()) << queue.status();
  const client::Arg args[] = {client::Arg::buffer(*buffer), client::Arg::scalar<int32_t>(3)};
  for (int i = 0; i < 8; ++i)
    ASSERT_TRUE((*queue)->launch(kernels[0], client::Dims{16}, nullptr, args).ok());
  EXPECT_EQ(used("greedy", "launches_in_flight"), 8);
  expect_refused((*queue)->launch(kernels[0], client::Dims{16}, nullptr, args).status(),
                 "tenant `greedy` is at its quota of launches in flight: 8 in use, 1 more asked, "
                 "limit 8 (tenants.greedy.launches_in_flight)");
  ASSERT_TRUE((*queue)->wait().ok());
  EXPECT_EQ(used("greedy", "launches_in_flight"), 0);
  ASSERT_TRUE((*queue)->launch(kernels[0], client::Dims{16}, nullptr, args).ok());

  // Submit streams (one per gRPC queue): the queue above holds one.
  std::vector<std::unique_ptr<client::Queue>> queues;
  absl::Status refused;
  while (refused.ok() && queues.size() < 10) {
    auto q = c->create_queue();
    absl::Status s = q.ok() ? (*q)->ping() : q.status();
    if (s.ok()) queues.push_back(*std::move(q));
    refused = s;
  }
  EXPECT_EQ(queues.size(), 3u);
  expect_refused(refused,
                 "tenant `greedy` is at its quota of Submit streams: 4 in use, 1 more asked, "
                 "limit 4 (tenants.greedy.streams)");
  EXPECT_EQ(used("greedy", "queues"), 5);  // the refused stream's queue was made

  // Another tenant is served meanwhile, with its own quotas.
  expect_bystander_served(daemon_->tcp_uri(), 41, kFillSource, false, token(kCalmToken));

  queues.clear();
  queue->reset();
  c.reset();
  EXPECT_TRUE(tenant_back_to_zero("greedy"));
  EXPECT_TRUE(tenant_back_to_zero("calm"));
}

TEST_F(TenantQuotas, ATenantSeesOnlyItsOwnUseAndTheOperatorSeesEveryone) {
  auto c = greedy();
  ASSERT_NE(c, nullptr);
  auto own = c->status();
  ASSERT_TRUE(own.ok()) << own.status();
  ASSERT_EQ(own->tenants.size(), 1u);
  EXPECT_EQ(own->tenants[0].name, "greedy");
  EXPECT_EQ(own->tenants[0].weight, 2u);
  EXPECT_EQ(own->tenants[0].priority, 1);

  auto observer = Client::connect(daemon_->unix_uri(), "operator");
  ASSERT_TRUE(observer.ok()) << observer.status();
  auto all = (*observer)->status();
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<std::string> names;
  for (const auto& t : all->tenants) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"default", "greedy", "local"}));
}

// DESIGN §8's load test: one tenant asks for 10,000 modules, 2,000 Submit
// streams and 500 shared-memory channels; past its quotas each is refused,
// and another tenant's launches run and are right throughout.
TEST_F(TenantQuotas, ThousandsOfRequestsFromOneTenantLeaveAnotherTenantsLaunchesRunning) {
  std::atomic<bool> done{false};
  std::atomic<int> bystander_runs{0};
  std::thread bystander([&] {
    while (!done.load()) {
      expect_bystander_served(daemon_->tcp_uri(), 19 + bystander_runs.load(), kFillSource, false,
                              token(kCalmToken));
      ++bystander_runs;
    }
  });

  auto c = greedy();
  ASSERT_NE(c, nullptr);
  int loaded = 0, refused = 0;
  for (int i = 0; i < 10000; ++i) {
    auto m = c->load_module(absl::StrCat(kFillSource, "// ", i, "\n"));
    if (m.ok()) {
      ++loaded;
    } else {
      ++refused;
      ASSERT_EQ(m.status().code(), absl::StatusCode::kResourceExhausted) << m.status();
    }
  }
  EXPECT_GT(loaded, 0);
  EXPECT_EQ(loaded + refused, 10000);
  EXPECT_LE(used("greedy", "module_bytes"), 4096);

  int streams = 0;
  refused = 0;
  {
    std::vector<std::unique_ptr<client::Queue>> queues;
    for (int i = 0; i < 2000; ++i) {
      auto q = c->create_queue();
      absl::Status s = q.ok() ? (*q)->ping() : q.status();
      if (s.ok()) {
        ++streams;
        queues.push_back(*std::move(q));
      } else {
        ++refused;
        ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
      }
    }
  }
  EXPECT_EQ(streams, 4);
  EXPECT_EQ(refused, 1996);

  auto local = Client::connect(daemon_->unix_uri() + "?transport=shm", "many-channels");
  ASSERT_TRUE(local.ok()) << local.status();
  int channels = 0;
  absl::Status last;
  {
    std::vector<std::unique_ptr<client::Queue>> queues;
    for (int i = 0; i < 500; ++i) {
      auto q = (*local)->create_queue();
      absl::Status s = q.ok() ? (*q)->ping() : q.status();
      if (s.ok()) {
        ++channels;
        queues.push_back(*std::move(q));
      } else {
        last = s;
      }
    }
  }
  EXPECT_EQ(channels, 5);
  expect_refused(last,
                 "tenant `local` is at its quota of shared-memory channels: 5 in use, 1 more "
                 "asked, limit 5 (tenants.local.channels)");

  done.store(true);
  bystander.join();
  EXPECT_GT(bystander_runs.load(), 0);
  c.reset();
  local->reset();
  EXPECT_TRUE(tenant_back_to_zero("greedy"));
  EXPECT_TRUE(tenant_back_to_zero("local"));
}

// kad whose tenant `local` (this test's user) has a quota of launches in
// flight, and the session objects a launch of `fill` needs.
class LaunchesInFlight : public ::testing::Test {
 protected:
  void start(uint32_t quota, uint32_t device_queue_depth, bool workers = false) {
    char dir[] = "/tmp/kad-in-flight-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    std::ofstream(dir_ + "/kad.toml")
        << "[tenants.local]\nuids = [" << getuid() << "]\nlaunches_in_flight = " << quota << "\n";
    std::vector<std::string> flags = {"--device-queue-depth", std::to_string(device_queue_depth),
                                      "--config", dir_ + "/kad.toml"};
    if (!workers) flags.push_back("--no-workers");
    auto d = Daemon::start(flags);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
  }
  void TearDown() override {
    daemon_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string uri(const char* transport) const {
    return daemon_->unix_uri() + "?transport=" + transport;
  }

  // A session on `uri` with the fill kernel, a buffer of `ints` and a queue.
  struct FillSession {
    std::unique_ptr<Client> client;
    std::optional<client::Kernel> fill;
    std::optional<client::Buffer> buffer;
    std::unique_ptr<client::Queue> queue;
  };
  static FillSession fill_session(const std::string& uri, uint64_t ints) {
    FillSession f;
    auto c = Client::connect(uri, "fill");
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return f;
    f.client = *std::move(c);
    auto module = f.client->load_module(kFillSource);
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) return f;
    auto fill = f.client->get_kernel(
        *module, {.entry = "fill",
                  .args = {client::ArgSpec::buffer(),
                           client::ArgSpec::scalar_of(client::ScalarType::kI32)}});
    auto buffer = f.client->allocate(ints * sizeof(int32_t));
    auto queue = f.client->create_queue();
    EXPECT_TRUE(fill.ok() && buffer.ok() && queue.ok())
        << fill.status() << buffer.status() << queue.status();
    if (fill.ok()) f.fill = *fill;
    if (buffer.ok()) f.buffer = *buffer;
    if (queue.ok()) f.queue = *std::move(queue);
    return f;
  }

  // The tenant's launches in flight, as kad reports them.
  int64_t in_flight() const {
    auto observer = Client::connect(uri("grpc"), "observer");
    EXPECT_TRUE(observer.ok()) << observer.status();
    if (!observer.ok()) return -1;
    auto s = (*observer)->status();
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return -1;
    for (const auto& t : s->tenants)
      for (const auto& q : t.quotas)
        if (t.name == "local" && q.quota == "launches_in_flight")
          return static_cast<int64_t>(q.used);
    return -1;
  }

  // On a device kad does not schedule, a client launches up to the
  // tenant's quota and goes idle without a wait; another session of the
  // tenant then launches once those launches have ended.
  void expect_an_idle_client_holds_no_ended_launches() {
    for (const char* transport : {"grpc", "shm"}) {
      SCOPED_TRACE(transport);
      FillSession idle = fill_session(uri(transport), 16);
      ASSERT_TRUE(idle.queue && idle.fill && idle.buffer);
      const client::Arg args[] = {client::Arg::buffer(*idle.buffer),
                                  client::Arg::scalar<int32_t>(3)};
      for (int i = 0; i < 4; ++i)
        ASSERT_TRUE(idle.queue->launch(*idle.fill, client::Dims{16}, nullptr, args).ok()) << i;
      ASSERT_TRUE(idle.queue->ping().ok());  // every launch has reached kad
      ASSERT_EQ(in_flight(), 4) << "the quota is full";

      FillSession other = fill_session(uri(transport), 16);
      ASSERT_TRUE(other.queue && other.fill && other.buffer);
      const client::Arg its_args[] = {client::Arg::buffer(*other.buffer),
                                      client::Arg::scalar<int32_t>(5)};
      // Refused only while the idle client's launches may still run.
      absl::Status launched;
      for (int attempt = 0; attempt < 500; ++attempt) {
        launched = other.queue->launch(*other.fill, client::Dims{16}, nullptr, its_args).status();
        if (launched.ok()) launched = other.queue->wait();  // over shm, a refusal comes here
        if (launched.code() != absl::StatusCode::kResourceExhausted) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      ASSERT_TRUE(launched.ok()) << launched;
      std::vector<int32_t> out(16);
      ASSERT_TRUE(other.queue->read(*other.buffer, 0, bytes_of(out)).ok());
      EXPECT_EQ(out, std::vector<int32_t>(16, 5));
      ASSERT_TRUE(idle.queue->read(*idle.buffer, 0, bytes_of(out)).ok());
      EXPECT_EQ(out, std::vector<int32_t>(16, 3));
      EXPECT_EQ(in_flight(), 0);
    }
  }

  std::string dir_;
  std::unique_ptr<Daemon> daemon_;
};

// A tenant's launches in flight are those not yet known to have ended: the
// device's scheduler gives back what ended whether or not the client waits.
// A client that pipelines past the quota without a wait goes on launching,
// and holds at most what is still in kad or on the device, so that other
// sessions of its tenant (the default tenant's are everyone's) still launch.
TEST_F(LaunchesInFlight, LaunchesThatEndedStopCountingWithoutAWait) {
  constexpr uint32_t kDepth = 4;
  constexpr uint32_t kQuota = kDepth + server::ScheduledQueue::kHeldLaunches + 4;
  start(kQuota, kDepth);
  ASSERT_NE(daemon_, nullptr);
  for (const char* transport : {"grpc", "shm"}) {
    SCOPED_TRACE(transport);
    FillSession pipeline = fill_session(uri(transport), 64);
    ASSERT_TRUE(pipeline.queue && pipeline.fill && pipeline.buffer);
    const client::Arg args[] = {client::Arg::buffer(*pipeline.buffer),
                                client::Arg::scalar<int32_t>(7)};
    // Ten times the quota, never waiting: each launch is accepted.
    for (uint32_t i = 0; i < 10 * kQuota; ++i) {
      absl::Status launched =
          pipeline.queue->launch(*pipeline.fill, client::Dims{64}, nullptr, args).status();
      ASSERT_TRUE(launched.ok()) << "launch " << i << ": " << launched;
    }
    ASSERT_TRUE(pipeline.queue->ping().ok());  // every launch has reached kad
    // What the client left unwaited is what kad still holds or the device runs.
    EXPECT_LE(in_flight(), kDepth + server::ScheduledQueue::kHeldLaunches);
    // Another session of the tenant launches meanwhile.
    expect_bystander_served(uri(transport), 5);

    std::vector<int32_t> out(64);
    ASSERT_TRUE(pipeline.queue->read(*pipeline.buffer, 0, bytes_of(out)).ok());
    EXPECT_EQ(out, std::vector<int32_t>(64, 7));
    EXPECT_EQ(in_flight(), 0);
  }
}

// A copy comes after the queue's launches and waits for them: it gives them
// back as a wait does, also on a device kad does not schedule (depth 0), so
// that a client that launches and reads, never waiting, holds nothing.
// On a device kad does not schedule (--device-queue-depth 0) nothing
// watches launches end: a client that launched up to its tenant's quota and
// went idle without a wait held the quota for good, and every other session
// of the tenant was refused. A launch that finds the tenant at its quota
// now first gives back what ended.
TEST_F(LaunchesInFlight, AnIdleClientHoldsNoEndedLaunchesOnAnUnscheduledDevice) {
  start(/*quota=*/4, /*device_queue_depth=*/0);
  ASSERT_NE(daemon_, nullptr);
  expect_an_idle_client_holds_no_ended_launches();
}

TEST_F(LaunchesInFlight, ThroughWorkersAnIdleClientHoldsNoEndedLaunchesOnAnUnscheduledDevice) {
  start(/*quota=*/4, /*device_queue_depth=*/0, /*workers=*/true);
  ASSERT_NE(daemon_, nullptr);
  expect_an_idle_client_holds_no_ended_launches();
}

TEST_F(LaunchesInFlight, ACopyAfterLaunchesGivesThemBackAsAWaitDoes) {
  start(/*quota=*/4, /*device_queue_depth=*/0);
  ASSERT_NE(daemon_, nullptr);
  for (const char* transport : {"grpc", "shm"}) {
    SCOPED_TRACE(transport);
    // Each round launches and reads back, as a bystander does: 20 rounds
    // under a quota of 4.
    for (int round = 0; round < 20; ++round) expect_bystander_served(uri(transport), round);
    FillSession c = fill_session(uri(transport), 16);
    ASSERT_TRUE(c.queue && c.fill && c.buffer);
    std::vector<int32_t> out(16);
    for (int32_t i = 0; i < 20; ++i) {
      const client::Arg args[] = {client::Arg::buffer(*c.buffer), client::Arg::scalar<int32_t>(i)};
      ASSERT_TRUE(c.queue->launch(*c.fill, client::Dims{16}, nullptr, args).ok()) << i;
      ASSERT_TRUE(c.queue->read(*c.buffer, 0, bytes_of(out)).ok()) << i;
      ASSERT_EQ(out, std::vector<int32_t>(16, i));
      ASSERT_TRUE(c.queue->write(*c.buffer, 0, bytes_of(out)).ok()) << i;
    }
  }
}

// DESIGN §8's global guard: what clients make kad hold in its own host
// memory (module copies, zero-copy buffers, channel and queue rings) is bounded for
// all of them together; past it a request is RESOURCE_EXHAUSTED naming
// --max-host-memory, and what goes gives its share back.
TEST(HostMemoryGuard, BoundsWhatClientsMakeKadHoldAndGetsItBackWhenItGoes) {
  auto d = Daemon::start({"--no-workers", "--max-host-memory", "8000000"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto observer = Client::connect((*d)->unix_uri() + "?transport=grpc", "observer");
  ASSERT_TRUE(observer.ok()) << observer.status();
  auto held = [&]() -> int64_t {
    auto s = (*observer)->status();
    EXPECT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->host_memory_limit, 8000000u);
    return s.ok() ? static_cast<int64_t>(s->host_memory_bytes) : -1;
  };
  ASSERT_EQ(held(), 0);

  auto c = Client::connect((*d)->unix_uri() + "?transport=grpc", "hungry");
  ASSERT_TRUE(c.ok()) << c.status();
  auto big = (*c)->allocate(2000000);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(held(), 2000000);
  auto more = (*c)->allocate(6500000);
  EXPECT_EQ(more.status().code(), absl::StatusCode::kResourceExhausted) << more.status();
  EXPECT_TRUE(absl::StrContains(
      more.status().message(),
      "kad is at its quota of bytes of its own host memory (module copies, shared buffers, "
      "channel and queue rings, program binaries): 2000000 in use, 6500000 more asked, limit "
      "8000000 "
      "(--max-host-memory)"))
      << more.status();

  // A module's copy, a channel's rings and a scheduled queue's rings count too.
  const int64_t queue_rings = static_cast<int64_t>(
      server::ScheduledQueue::host_bytes(server::EngineLimits{}.device_queue_depth));
  auto module = (*c)->load_module(kFillSource);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ(held(), 2000000 + static_cast<int64_t>(std::string(kFillSource).size()));
  auto shm = Client::connect((*d)->unix_uri() + "?transport=shm", "channel");
  ASSERT_TRUE(shm.ok()) << shm.status();
  auto channel = (*shm)->create_queue();
  ASSERT_TRUE(channel.ok()) << channel.status();
  ASSERT_TRUE((*channel)->shared_memory());
  EXPECT_EQ(held(),
            2000000 + queue_rings +
                static_cast<int64_t>(std::string(kFillSource).size() + shm::v1::kChannelBytes));
  channel->reset();
  shm->reset();
  // kad sees the channel's client go a moment later.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  const int64_t module_copy = static_cast<int64_t>(std::string(kFillSource).size());
  while (held() != 2000000 + module_copy && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(held(), 2000000 + module_copy);

  // What goes gives its share back.
  ASSERT_TRUE((*c)->free(*big).ok());
  auto now = (*c)->allocate(6500000);
  EXPECT_TRUE(now.ok()) << now.status();
  c->reset();
  while (held() != 0 && std::chrono::steady_clock::now() < deadline + std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(held(), 0);
}

// DESIGN §8: kad's compiled-kernel cache keeps --max-compiled-kernels
// entries, dropping the least recently used; a kernel that holds a dropped
// one goes on launching it, and another session compiles it again.
TEST(CompiledKernelCache, IsBoundedAndAKernelKeepsWhatItDropped) {
  auto d = Daemon::start({"--no-workers", "--max-compiled-kernels", "1"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto c = Client::connect((*d)->unix_uri(), "two-kernels");
  ASSERT_TRUE(c.ok()) << c.status();
  auto q = (*c)->create_queue();
  auto b = (*c)->allocate(16 * sizeof(int32_t));
  ASSERT_TRUE(q.ok() && b.ok());
  const client::KernelSpec fill{
      .entry = "fill",
      .args = {client::ArgSpec::buffer(), client::ArgSpec::scalar_of(client::ScalarType::kI32)}};
  // Two modules that differ: two cache entries.
  auto first_module = (*c)->load_module(absl::StrCat(kFillSource, "// first\n"));
  auto second_module = (*c)->load_module(absl::StrCat(kFillSource, "// second\n"));
  ASSERT_TRUE(first_module.ok() && second_module.ok());
  auto first = (*c)->get_kernel(*first_module, fill);
  auto second = (*c)->get_kernel(*second_module, fill);
  ASSERT_TRUE(first.ok() && second.ok());
  auto run = [&](const client::Kernel& k, int32_t value) {
    const client::Arg args[] = {client::Arg::buffer(*b), client::Arg::scalar<int32_t>(value)};
    ASSERT_TRUE((*q)->launch(k, client::Dims{16}, nullptr, args).ok());
    std::vector<int32_t> got(16);
    ASSERT_TRUE((*q)->read(*b, 0, bytes_of(got)).ok());
    EXPECT_EQ(got, std::vector<int32_t>(16, value));
  };
  run(*first, 1);
  run(*second, 2);  // the cache drops the first
  auto s = (*c)->status();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->cache_entries, 1u);
  EXPECT_EQ(s->cache_max_entries, 1u);
  EXPECT_EQ(s->cache_evictions, 1u);
  EXPECT_EQ(s->cache_compilations, 2u);
  // The first kernel still holds its compiled code: no compile.
  run(*first, 3);
  EXPECT_EQ((*c)->status()->cache_compilations, 2u);

  // Another session asks for the dropped key: compiled again.
  auto other = Client::connect((*d)->unix_uri(), "other");
  ASSERT_TRUE(other.ok()) << other.status();
  auto m = (*other)->load_module(absl::StrCat(kFillSource, "// first\n"));
  ASSERT_TRUE(m.ok());
  auto k = (*other)->get_kernel(*m, fill);
  auto oq = (*other)->create_queue();
  auto ob = (*other)->allocate(16 * sizeof(int32_t));
  ASSERT_TRUE(k.ok() && oq.ok() && ob.ok());
  const client::Arg args[] = {client::Arg::buffer(*ob), client::Arg::scalar<int32_t>(4)};
  ASSERT_TRUE((*oq)->launch(*k, client::Dims{16}, nullptr, args).ok());
  ASSERT_TRUE((*oq)->wait().ok());
  auto after = (*other)->status();
  EXPECT_EQ(after->cache_compilations, 3u);
  EXPECT_EQ(after->cache_evictions, 2u);
}

// The niceness every thread of process `pid` has, or -100 where they
// differ or cannot be read.
int nice_of_threads(pid_t pid) {
  int nice = -100;
  std::error_code ec;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
    const std::string stat = testing::read_proc_file(task.path() / "stat");
    if (stat.empty()) continue;  // the thread ended
    // Fields after the command's closing parenthesis: state is field 3,
    // nice is field 19.
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 19 && fields >> field; ++i) {
    }
    const int n = std::stoi(field);
    if (nice != -100 && nice != n) return -100;
    nice = n;
  }
  return nice;
}

// DESIGN §8, a tenant's share of a CPU device: its kernels run in workers
// at a niceness from its priority (classes ten steps apart) and weight
// (three steps per halving within a class), which kactl status shows.
TEST(TenantCpuShare, ATenantsWorkersRunAtTheNicenessOfItsPriorityAndWeight) {
  char dir[] = "/tmp/kad-cpu-share-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::ofstream(std::string(dir) + "/tokens") << kGreedyToken << " batch\n"
                                              << kCalmToken << " interactive\n";
  std::ofstream(std::string(dir) + "/kad.toml") << "[tenants.interactive]\npriority = 1\n"
                                                   "[tenants.default]\nweight = 4\n"
                                                   "[tenants.batch]\nweight = 1\n";
  auto d = Daemon::start({"--worker-spares", "0", "--tokens", std::string(dir) + "/tokens",
                          "--config", std::string(dir) + "/kad.toml"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto observer = Client::connect((*d)->unix_uri(), "observer");
  ASSERT_TRUE(observer.ok()) << observer.status();
  auto status = (*observer)->status();
  ASSERT_TRUE(status.ok()) << status.status();
  std::map<std::string, int> nice;
  for (const auto& t : status->tenants) nice[t.name] = t.cpu_nice;
  // interactive: the highest class; default: one class below, its heaviest;
  // batch: default's class, a quarter of its weight (two halvings).
  EXPECT_EQ(nice, (std::map<std::string, int>{{"batch", 16}, {"default", 10}, {"interactive", 0}}));

  // A batch session's worker runs at 16, every thread of it.
  client::ConnectOptions options;
  options.token = kGreedyToken;
  auto batch = Client::connect((*d)->tcp_uri(), "batch", options);
  ASSERT_TRUE(batch.ok()) << batch.status();
  auto q = (*batch)->create_queue();
  auto b = (*batch)->allocate(16 * sizeof(int32_t));
  auto m = (*batch)->load_module(kFillSource);
  ASSERT_TRUE(q.ok() && b.ok() && m.ok());
  auto k = (*batch)->get_kernel(
      *m,
      {.entry = "fill",
       .args = {client::ArgSpec::buffer(), client::ArgSpec::scalar_of(client::ScalarType::kI32)}});
  ASSERT_TRUE(k.ok()) << k.status();
  const client::Arg args[] = {client::Arg::buffer(*b), client::Arg::scalar<int32_t>(5)};
  ASSERT_TRUE((*q)->launch(*k, client::Dims{16}, nullptr, args).ok());
  ASSERT_TRUE((*q)->wait().ok());
  std::vector<int> workers;
  for (pid_t child : testing::children_of((*d)->pid())) workers.push_back(nice_of_threads(child));
  EXPECT_THAT(workers, ::testing::Contains(16)) << "no worker of kad runs at niceness 16";
  // The observer's own session (default, on the UNIX socket) launched nothing: no worker at 10.
  EXPECT_THAT(workers, ::testing::Not(::testing::Contains(10)));

  // Where kad may make CPU groups (root on cgroup v1, a delegated v2
  // subtree), the batch worker is in its tenant's, weighted one class down.
  if (absl::StrContains((*d)->log(), "share the CPU by niceness alone")) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "kad cannot make CPU groups here: " << (*d)->log();
  }
  const std::string group = absl::StrCat("/kad-", (*d)->pid(), "/batch");
  std::string found;
  for (pid_t child : testing::children_of((*d)->pid())) {
    std::ifstream in(absl::StrCat("/proc/", child, "/cgroup"));
    std::string line;
    while (std::getline(in, line))
      if (absl::EndsWith(line, group)) found = line;
  }
  EXPECT_FALSE(found.empty()) << "no worker of kad in a group ending " << group;
  std::string weight;
  for (const char* root : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup"}) {
    for (const char* file : {"/cpu.shares", "/cpu.weight"}) {
      std::ifstream in(std::string(root) + group + file);
      if (in >> weight) break;
    }
    if (!weight.empty()) break;
  }
  // Weight 1 (1024 shares on v1, 100 on v2), one class below `interactive`: / 100.
  EXPECT_THAT(weight, ::testing::AnyOf("10", "1")) << "the batch group's CPU weight";
  // A kad that exits removes its groups.
  const std::string mine = found.substr(found.rfind(':') + 1);
  batch->reset();
  observer->reset();
  EXPECT_EQ((*d)->stop(SIGTERM), 0) << (*d)->log();
  for (const char* root : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup"})
    EXPECT_FALSE(std::filesystem::exists(std::string(root) + mine.substr(0, mine.rfind('/'))))
        << root << mine;
  std::filesystem::remove_all(dir);
}

// The CPU group `pid` is in, as /proc/PID/cgroup names it for the CPU
// controller (cgroup v1) or the one hierarchy (v2); empty if none is found.
std::string cpu_group_of(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/cgroup"));
  std::string line;
  while (std::getline(in, line)) {
    const std::vector<std::string> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    const std::vector<std::string> controllers = absl::StrSplit(fields[1], ',');
    if (fields[0] == "0" ||
        std::find(controllers.begin(), controllers.end(), "cpu") != controllers.end())
      return fields[2];
  }
  return "";
}

// Moving a process between CPU groups takes about 10 ms (cgroup v1 waits
// for an RCU grace period): spares wait in the default tenant's group, so
// that a default session's first request moves nothing, while another
// tenant's session still gets its worker moved into its own group.
TEST(TenantCpuShare, SparesWaitInTheDefaultTenantsGroupAndATakenOneJoinsItsTenants) {
  char dir[] = "/tmp/kad-cpu-spare-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::ofstream(std::string(dir) + "/tokens") << kGreedyToken << " batch\n";
  std::ofstream(std::string(dir) + "/kad.toml") << "[tenants.batch]\nweight = 1\n";
  auto d = Daemon::start({"--worker-spares", "1", "--tokens", std::string(dir) + "/tokens",
                          "--config", std::string(dir) + "/kad.toml"});
  ASSERT_TRUE(d.ok()) << d.status();
  if (absl::StrContains((*d)->log(), "share the CPU by niceness alone")) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "kad cannot make CPU groups here: " << (*d)->log();
  }
  const std::string groups = absl::StrCat("/kad-", (*d)->pid(), "/");
  // The spare, before any session: in the default tenant's group.
  auto in_group = [&](const std::string& tenant) {
    std::vector<pid_t> out;
    for (pid_t child : testing::children_of((*d)->pid()))
      if (absl::EndsWith(cpu_group_of(child), groups + tenant)) out.push_back(child);
    return out;
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (in_group("default").empty() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::vector<pid_t> spares = in_group("default");
  ASSERT_EQ(spares.size(), 1u) << "no spare in " << groups << "default";

  // A batch session takes that spare: it joins batch's group.
  client::ConnectOptions options;
  options.token = kGreedyToken;
  auto batch = Client::connect((*d)->tcp_uri(), "batch", options);
  ASSERT_TRUE(batch.ok()) << batch.status();
  auto q = (*batch)->create_queue();
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(in_group("batch"), spares) << "the spare a batch session took";
  batch->reset();
  EXPECT_EQ((*d)->stop(SIGTERM), 0) << (*d)->log();
  std::filesystem::remove_all(dir);
}

// The group that holds every tenant's group weighs as many processes as it
// holds workers: beside it, kad's own threads and the clients count one
// task each, and at one task's weight 32 workers together got as much CPU
// as one of them.
TEST(TenantCpuShare, KadsGroupWeighsAsManyProcessesAsItHoldsWorkers) {
  auto d = Daemon::start({"--worker-spares", "1"});
  ASSERT_TRUE(d.ok()) << d.status();
  if (absl::StrContains((*d)->log(), "share the CPU by niceness alone"))
    GTEST_SKIP() << "kad cannot make CPU groups here: " << (*d)->log();
  const std::string groups = absl::StrCat("/kad-", (*d)->pid());
  std::string weight_file;
  bool v2 = false;
  for (const char* root : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup"}) {
    for (const char* file : {"/cpu.shares", "/cpu.weight"}) {
      const std::string f = std::string(root) + groups + file;
      if (weight_file.empty() && std::filesystem::exists(f)) {
        weight_file = f;
        v2 = absl::EndsWith(f, "weight");
      }
    }
  }
  ASSERT_FALSE(weight_file.empty()) << "no weight file for " << groups;
  auto weight = [&] {
    uint64_t w = 0;
    std::ifstream(weight_file) >> w;
    return w;
  };
  auto workers_in_groups = [&] {
    size_t n = 0;
    for (pid_t child : testing::children_of((*d)->pid()))
      if (absl::StrContains(cpu_group_of(child), groups + "/")) ++n;
    return n;
  };
  using server::worker::CpuGroups;
  // Until the weight is that of `n` workers and `n` workers are in the groups.
  auto settles_at = [&](size_t n) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((weight() != CpuGroups::population_weight(n, v2) || workers_in_groups() != n) &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return weight() == CpuGroups::population_weight(n, v2) && workers_in_groups() == n;
  };
  EXPECT_TRUE(settles_at(1)) << "the spare alone: weight " << weight() << ", "
                             << workers_in_groups() << " workers";
  // Three sessions take a worker each, and the pool starts a new spare.
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 3; ++i) {
    auto c = Client::connect((*d)->unix_uri(), "weighed");
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->create_queue().ok());
    clients.push_back(*std::move(c));
  }
  EXPECT_TRUE(settles_at(4)) << "three sessions and a spare: weight " << weight() << ", "
                             << workers_in_groups() << " workers";
  clients.clear();  // their workers end
  EXPECT_TRUE(settles_at(1)) << "the spare again: weight " << weight() << ", "
                             << workers_in_groups() << " workers";
  EXPECT_EQ((*d)->stop(SIGTERM), 0) << (*d)->log();
}

TEST(TenantCpuShare, GroupWeightsFollowWeightsAndPriorityClasses) {
  using server::worker::CpuGroups;
  EXPECT_EQ(CpuGroups::population_weight(0, false), 1024u) << "an empty group weighs one";
  EXPECT_EQ(CpuGroups::population_weight(32, false), 32u * 1024);
  EXPECT_EQ(CpuGroups::population_weight(1000, false), 262144u) << "v1's maximum";
  EXPECT_EQ(CpuGroups::population_weight(3, true), 300u);
  EXPECT_EQ(CpuGroups::population_weight(1000, true), 10000u) << "v2's maximum";
  EXPECT_EQ(CpuGroups::group_weight(1, 0, false), 1024u);
  EXPECT_EQ(CpuGroups::group_weight(4, 0, false), 4096u);
  EXPECT_EQ(CpuGroups::group_weight(1000, 0, false), 262144u) << "v1's maximum";
  EXPECT_EQ(CpuGroups::group_weight(4, 1, false), 40u);
  EXPECT_EQ(CpuGroups::group_weight(1, 2, false), 2u) << "v1's minimum";
  EXPECT_EQ(CpuGroups::group_weight(1, 0, true), 100u);
  EXPECT_EQ(CpuGroups::group_weight(200, 0, true), 10000u) << "v2's maximum";
  EXPECT_EQ(CpuGroups::group_weight(3, 1, true), 3u);
  EXPECT_EQ(CpuGroups::group_weight(1, 1, true), 1u) << "v2's minimum";
}

}  // namespace
}  // namespace kad::testing
