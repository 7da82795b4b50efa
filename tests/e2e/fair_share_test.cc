// DESIGN §8's fair share on a device that sessions share in kad (here PoCL
// with --no-workers, as a GPU is shared), and on the CPU device whose
// sessions each have a worker (the default): the device takes at most
// --device-queue-depth launches of all sessions together; the rest wait in
// kad, keep their order and their event ids, and go to the device by
// priority class, then by tenant weight. A client that never waits cannot
// keep the device from others. Real kad, real PoCL, real sockets; no
// timing is asserted (the shares themselves are measured in bench/).
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kad/client.h"
#include "tests/e2e/e2e.h"
#include "tests/support/daemon.h"

namespace kad::testing {
namespace {

constexpr char kLowToken[] = "low-priority-token-0123456789";
constexpr char kHighToken[] = "high-priority-token-0123456789";

// out[0] = out[0] * 31 + v: the result depends on the order of the launches.
// Folds launches' values in their order; each launch first keeps its
// work-item busy for `steps` dependent steps, so that launches past the
// depth find the device still busy (kad sends a launch at once when a look
// finds the queue's earlier launches ended).
std::string fold_source(int steps) {
  return absl::StrCat(
      "kernel void fold(KAD_CONTEXT, global int* out, int v) {\n"
      "  float acc = 0.0f;\n"
      "  for (int i = 0; i < ",
      steps,
      "; ++i) acc = acc * 0.999999f + 1.0f;\n"
      "  if (kad_active()) out[0] = out[0] * 31 + v + (acc < 0.0f ? 1 : 0);\n}\n");
}
// A launch that keeps one work-item busy for `n` dependent steps.
constexpr char kSpinSource[] =
    "kernel void spin(KAD_CONTEXT, global float* out, int n) {\n"
    "  float acc = out[0];\n"
    "  for (int i = 0; i < n; ++i) acc = acc * 0.999999f + 1.0f;\n"
    "  if (kad_active()) out[0] = acc;\n}\n";

class FairShare : public ::testing::Test {
 public:
  // Launches that ever waited in kad for the device.
  uint64_t held_total() const { return device_status().held_total; }

 protected:
  void start(int depth, bool workers = false) {
    char dir[] = "/tmp/kad-fair-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    std::ofstream(dir_ + "/tokens") << kLowToken << " low\n" << kHighToken << " high\n";
    std::ofstream(dir_ + "/kad.toml") << "[tenants.low]\n"
                                         "priority = 0\n"
                                         "[tenants.high]\n"
                                         "priority = 1\n";
    std::vector<std::string> flags = {
        "--device-queue-depth", std::to_string(depth), "--tokens", dir_ + "/tokens", "--config",
        dir_ + "/kad.toml"};
    if (!workers) flags.push_back("--no-workers");
    auto d = Daemon::start(flags);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
  }
  void TearDown() override {
    daemon_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<Client> connect(const char* token, const std::string& name) const {
    client::ConnectOptions options;
    options.token = token;
    auto c = Client::connect(daemon_->tcp_uri(), name, options);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  // The shared device's scheduler, as GetStatus shows it to the operator.
  client::ServiceStatus::Device device_status() const {
    auto c = Client::connect(daemon_->unix_uri(), "operator");
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return {};
    auto s = (*c)->status();
    EXPECT_TRUE(s.ok() && !s->devices.empty()) << s.status();
    return s.ok() && !s->devices.empty() ? s->devices[0] : client::ServiceStatus::Device{};
  }

  // A low tenant's long launches fill the device and wait in kad; a high
  // tenant's launch goes before them.
  void expect_a_higher_priority_launch_goes_first();

  std::string dir_;
  std::unique_ptr<Daemon> daemon_;
};

struct Loaded {
  std::unique_ptr<client::Queue> queue;
  client::Buffer buffer;
  client::Kernel kernel;
};

Loaded load(Client& c, const std::string& source, const char* entry, client::ScalarType scalar) {
  Loaded l;
  auto q = c.create_queue();
  auto b = c.allocate(sizeof(int32_t));
  auto m = c.load_module(source);
  EXPECT_TRUE(q.ok() && b.ok() && m.ok()) << q.status() << b.status() << m.status();
  if (!q.ok() || !b.ok() || !m.ok()) return l;
  auto k = c.get_kernel(
      *m,
      {.entry = entry, .args = {client::ArgSpec::buffer(), client::ArgSpec::scalar_of(scalar)}});
  EXPECT_TRUE(k.ok()) << k.status();
  if (!k.ok()) return l;
  l.queue = *std::move(q);
  l.buffer = *b;
  l.kernel = *k;
  std::vector<int32_t> zero(1, 0);
  EXPECT_TRUE(l.queue->write(l.buffer, 0, bytes_of(zero)).ok());
  return l;
}

TEST_F(FairShare, LaunchesPastTheDeviceDepthWaitInKadAndRunInOrder) {
  start(4);
  auto c = connect(kLowToken, "pipeline");
  ASSERT_NE(c, nullptr);
  Loaded l = load(*c, fold_source(1'000'000), "fold", client::ScalarType::kI32);
  ASSERT_NE(l.queue, nullptr);
  constexpr int kLaunches = 300;
  uint32_t expected = 0;
  std::vector<uint64_t> events;
  for (int32_t v = 0; v < kLaunches; ++v) {
    const client::Arg args[] = {client::Arg::buffer(l.buffer), client::Arg::scalar<int32_t>(v)};
    auto launched = l.queue->launch(l.kernel, client::Dims{1}, nullptr, args);
    ASSERT_TRUE(launched.ok()) << launched.status();
    events.push_back(launched->event);
    expected = expected * 31 + static_cast<uint32_t>(v);
  }
  // Event ids stay consecutive, those of launches that waited in kad too.
  for (size_t i = 1; i < events.size(); ++i) ASSERT_EQ(events[i], events[i - 1] + 1) << i;
  ASSERT_TRUE(l.queue->wait(events[kLaunches / 2]).ok());
  ASSERT_TRUE(l.queue->wait().ok());
  std::vector<uint32_t> got(1);
  ASSERT_TRUE(l.queue->read(l.buffer, 0, bytes_of(got)).ok());
  EXPECT_EQ(got[0], expected) << "the launches ran in the order they were submitted";

  const client::ServiceStatus::Device d = device_status();
  EXPECT_EQ(d.queue_depth, 4u);
  EXPECT_EQ(d.contended_depth, 1u) << "4/16, at least one, in kad's process";
  EXPECT_GT(d.held_total, 0u) << "launches past the depth waited in kad";
  EXPECT_EQ(d.held, 0u);
  EXPECT_EQ(d.in_flight, 0u) << "all waited for: nothing on the device";
}

TEST_F(FairShare, AClientThatNeverWaitsDoesNotKeepTheDeviceFromOthers) {
  start(1);
  auto idle = connect(kLowToken, "never-waits");
  ASSERT_NE(idle, nullptr);
  Loaded l = load(*idle, fold_source(20'000'000), "fold", client::ScalarType::kI32);
  ASSERT_NE(l.queue, nullptr);
  for (int32_t v = 0; v < 12; ++v) {  // the device's one slot, and more waiting in kad
    const client::Arg args[] = {client::Arg::buffer(l.buffer), client::Arg::scalar<int32_t>(v)};
    ASSERT_TRUE(l.queue->launch(l.kernel, client::Dims{1}, nullptr, args).ok());
  }
  // kad sends them all to the device, the last holding its one slot: no one
  // waits for it, so no one has yet seen it end.
  client::ServiceStatus::Device d;
  for (int i = 0; i < 250 && (d = device_status()).held > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(d.held, 0u);
  ASSERT_EQ(d.in_flight, 1u);
  EXPECT_EQ(d.held_total, 11u);
  // The other tenant's launches need that slot: kad must notice the end of
  // the idle client's launch itself.
  auto served = std::async(std::launch::async, [&] {
    client::ConnectOptions options;
    options.token = kHighToken;
    for (int32_t i = 0; i < 3; ++i)
      expect_bystander_served(daemon_->tcp_uri(), 40 + i, kFillSource, false, options);
  });
  const bool ready = served.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  if (!ready) daemon_.reset();  // ends the bystander's calls: the test fails, not hangs
  served.get();
  EXPECT_TRUE(ready) << "the bystander waited for a slot the idle client's ended launch held";
}

// `n` queues of one tenant, each with one long launch: how many of those
// launches waited in kad.
uint64_t launches_held_of_queues(FairShare& test, Client& c, int n) {
  std::vector<Loaded> queues;
  for (int i = 0; i < n; ++i) {
    queues.push_back(load(c, kSpinSource, "spin", client::ScalarType::kI32));
    if (queues.back().queue == nullptr) return 0;
  }
  for (Loaded& l : queues) {  // about 0.3 s each: all are sent while the first runs
    const client::Arg args[] = {client::Arg::buffer(l.buffer),
                                client::Arg::scalar<int32_t>(200'000'000)};
    EXPECT_TRUE(l.queue->launch(l.kernel, client::Dims{1}, nullptr, args).ok());
  }
  for (Loaded& l : queues) EXPECT_TRUE(l.queue->wait().ok());
  return test.held_total();
}

// Sessions in kad (as on a GPU): one tenant's queues each put their first
// launch on the device at once; none waits in kad for another's.
TEST_F(FairShare, OneTenantsQueuesEachPutTheirFirstLaunchOnTheDeviceAtOnce) {
  start(16);  // contended: 1
  auto c = connect(kLowToken, "four-queues");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(launches_held_of_queues(*this, *c, 4), 0u);
}

// Through workers, the same launches take turns (their workers share the
// cores evenly so), at 4 launches per compute unit of the device (each
// runs on one core there).
TEST_F(FairShare, ThroughWorkersOneTenantsQueuesTakeTurnsAtFourLaunchesPerComputeUnit) {
  start(64, /*workers=*/true);
  auto c = connect(kLowToken, "many-queues");
  ASSERT_NE(c, nullptr);
  auto devices = c->devices();
  ASSERT_TRUE(devices.ok() && !devices->empty()) << devices.status();
  const uint64_t slots = 4 * (*devices)[0].compute_units;
  ASSERT_LT(slots + 3, 64u) << "a machine of more than 15 cores: the depth would decide";
  EXPECT_EQ(device_status().contended_depth, slots);
  EXPECT_EQ(launches_held_of_queues(*this, *c, static_cast<int>(slots) + 3), 3u)
      << slots << " on the device at once, the other three waited in kad";
}

void FairShare::expect_a_higher_priority_launch_goes_first() {
  auto low = connect(kLowToken, "low");
  auto high = connect(kHighToken, "high");
  ASSERT_TRUE(low != nullptr && high != nullptr);
  Loaded l = load(*low, kSpinSource, "spin", client::ScalarType::kI32);
  Loaded h = load(*high, kSpinSource, "spin", client::ScalarType::kI32);
  ASSERT_TRUE(l.queue != nullptr && h.queue != nullptr);
  // Twelve long launches of the low tenant: one on the device (depth 1),
  // eleven waiting in kad (each launch returns once kad holds it). The
  // first is ten times longer (about 0.3 s here): the others and the look
  // at kad's status all come while it runs, whatever else the machine does.
  for (int i = 0; i < 12; ++i) {
    const client::Arg long_args[] = {
        client::Arg::buffer(l.buffer),
        client::Arg::scalar<int32_t>(i == 0 ? 200'000'000 : 20'000'000)};
    ASSERT_TRUE(l.queue->launch(l.kernel, client::Dims{1}, nullptr, long_args).ok());
  }
  ASSERT_GE(device_status().held, 10u);
  // The high tenant's launch takes the next free slot, ahead of all eleven.
  const client::Arg short_args[] = {client::Arg::buffer(h.buffer), client::Arg::scalar<int32_t>(1)};
  auto launched = h.queue->launch(h.kernel, client::Dims{1}, nullptr, short_args);
  ASSERT_TRUE(launched.ok()) << launched.status();
  ASSERT_TRUE(h.queue->wait(launched->event).ok());
  EXPECT_GE(device_status().held, 5u)
      << "the high-priority launch ended while the low tenant's still waited in kad";
  ASSERT_TRUE(l.queue->wait().ok());
  EXPECT_EQ(device_status().held, 0u);
}

TEST_F(FairShare, AHigherPriorityTenantsLaunchGoesBeforeALowerOnesWaitingLaunches) {
  start(1);
  expect_a_higher_priority_launch_goes_first();
}

// Each session's kernels run in its own worker there, and the CPU device's
// launches are scheduled all the same: kad sends a launch to its session's
// worker once the device grants it a slot.
TEST_F(FairShare, ThroughWorkersAHigherPriorityTenantsLaunchGoesFirstToo) {
  start(1, /*workers=*/true);
  EXPECT_EQ(device_status().queue_depth, 1u);
  expect_a_higher_priority_launch_goes_first();
}

TEST(FairShareWorkers, TheCpuDeviceWhoseSessionsRunInWorkersIsScheduledByDefault) {
  auto d = Daemon::start();
  ASSERT_TRUE(d.ok()) << d.status();
  auto c = Client::connect((*d)->unix_uri(), "operator");
  ASSERT_TRUE(c.ok()) << c.status();
  auto s = (*c)->status();
  ASSERT_TRUE(s.ok() && !s->devices.empty()) << s.status();
  EXPECT_EQ(s->devices[0].queue_depth, 64u) << "--device-queue-depth's default";
}

}  // namespace
}  // namespace kad::testing
