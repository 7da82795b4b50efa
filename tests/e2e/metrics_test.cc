// --metrics (DESIGN §10): a real kad scraped over HTTP while a client works,
// each value checked against what the client did, the page accepted by
// `promtool check metrics`, and no label carrying what a client chose.
#include <httplib.h>
#include <stdio.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <span>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/metrics_scrape.h"

namespace kad {
namespace {

using client::Arg;
using client::ArgSpec;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::scrape;
using testing::value_of;

constexpr char kDouble[] =
    "kernel void twice(KAD_CONTEXT, global int* x) {\n"
    "  if (kad_active()) x[kad_global_linear()] *= 2;\n}\n";

TEST(Metrics, AScrapeCountsWhatAClientDidAndPassesPromtool) {
  char name[] = "/tmp/kad-metrics-XXXXXX";
  const std::string dir = mkdtemp(name);
  std::ofstream(dir + "/kad.toml") << "[tenants.default]\nqueues = 2\n";
  auto daemon =
      testing::Daemon::start({"--metrics", "tcp://127.0.0.1:0", "--config", dir + "/kad.toml"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::string url = (*daemon)->metrics_url();
  ASSERT_THAT(url, ::testing::StartsWith("http://127.0.0.1:"));

  const std::string device = "opencl:pocl:0";
  const std::string d = "{device=\"" + device + "\"}";
  {
    auto c = Client::connect((*daemon)->unix_uri(), "client-chosen-name");
    ASSERT_TRUE(c.ok()) << c.status();
    auto q = (*c)->create_queue();  // over shared memory
    ASSERT_TRUE(q.ok()) << q.status();
    ASSERT_TRUE((*q)->shared_memory());
    auto remote = Client::connect((*daemon)->tcp_uri(), "client-chosen-name");
    ASSERT_TRUE(remote.ok()) << remote.status();
    auto remote_queue = (*remote)->create_queue();  // over gRPC
    ASSERT_TRUE(remote_queue.ok()) << remote_queue.status();
    auto refused = (*c)->create_queue();  // the tenant's third queue: past its quota
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
    auto b = (*c)->allocate(4096);
    ASSERT_TRUE(b.ok());
    auto remote_buffer = (*remote)->allocate(3 << 20);
    ASSERT_TRUE(remote_buffer.ok());
    std::vector<std::byte> bytes(3 << 20, std::byte{1});
    ASSERT_TRUE((*q)->write(*b, 0, std::span(bytes).first(4096)).ok());
    ASSERT_TRUE((*q)->read(*b, 0, std::span(bytes).first(1000)).ok());
    ASSERT_TRUE((*remote_queue)->write(*remote_buffer, 0, bytes).ok());  // streamed
    ASSERT_TRUE((*remote_queue)->write(*remote_buffer, 0, std::span(bytes).first(10)).ok());
    ASSERT_TRUE((*remote_queue)->read(*remote_buffer, 0, bytes).ok());
    auto m = (*c)->load_module(kDouble);
    ASSERT_TRUE(m.ok());
    auto k = (*c)->get_kernel(*m, {.entry = "twice", .args = {ArgSpec::buffer()}});
    ASSERT_TRUE(k.ok()) << k.status();
    const Arg args[] = {Arg::buffer(*b)};
    for (int i = 0; i < 5; ++i) {
      auto launched = (*q)->launch(*k, client::Dims{1024}, nullptr, args);
      ASSERT_TRUE(launched.ok()) << launched.status();
    }
    ASSERT_TRUE((*q)->wait().ok());  // kad learns that all 5 ended
    auto no_args = (*q)->launch(*k, client::Dims{1024}, nullptr, {});  // a command that fails
    EXPECT_EQ(no_args.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ((*c)->free(client::Buffer{.handle = 987654, .size = 1}).code(),
              absl::StatusCode::kNotFound);

    const std::string page = scrape(url);
    EXPECT_EQ(value_of(page, "kad_sessions"), 2) << page;
    EXPECT_EQ(value_of(page, "kad_sessions_opened_total"), 2);
    EXPECT_EQ(value_of(page, "kad_buffers"), 2);
    EXPECT_EQ(value_of(page, "kad_queues"), 2);
    // The local buffer is zero-copy (PoCL's memory mapped into the client):
    // its writes and reads move no bytes through kad.
    ASSERT_TRUE(b->mapped);
    EXPECT_EQ(value_of(page, "kad_bytes_copied_total{transport=\"shm\",direction=\"to_device\"}"),
              0);
    EXPECT_EQ(value_of(page, "kad_bytes_copied_total{transport=\"shm\",direction=\"from_device\"}"),
              0);
    EXPECT_EQ(value_of(page, "kad_bytes_copied_total{transport=\"grpc\",direction=\"to_device\"}"),
              (3 << 20) + 10);
    EXPECT_EQ(
        value_of(page, "kad_bytes_copied_total{transport=\"grpc\",direction=\"from_device\"}"),
        3 << 20);
    EXPECT_EQ(value_of(page, "kad_device_launches_total" + d), 5);
    EXPECT_EQ(value_of(page, "kad_device_memory_bytes" + d), 4096 + (3 << 20));
    // Every launch's latency, in the histogram: the +Inf bucket holds all.
    EXPECT_EQ(value_of(page, "kad_launch_latency_seconds_count" + d), 5);
    EXPECT_EQ(
        value_of(page, "kad_launch_latency_seconds_bucket{device=\"" + device + "\",le=\"+Inf\"}"),
        5);
    EXPECT_GT(value_of(page, "kad_launch_latency_seconds_sum" + d), 0);
    EXPECT_EQ(value_of(page, "kad_device_buffers" + d), 2);
    EXPECT_EQ(value_of(page, "kad_device_queue_depth_limit" + d), 64);
    auto devices = (*c)->devices();
    ASSERT_TRUE(devices.ok() && !devices->empty()) << devices.status();
    EXPECT_EQ(value_of(page, "kad_device_contended_depth" + d),
              std::min<double>(64, 4 * (*devices)[0].compute_units))
        << "sessions run in workers: 4 launches per compute unit while queues compete";
    EXPECT_EQ(value_of(page, "kad_cache_misses_total"), 1);
    EXPECT_GT(value_of(page, "kad_cache_compile_seconds_total"), 0);
    EXPECT_EQ(value_of(page, "kad_quota_refusals_total{tenant=\"default\",quota=\"queues\"}"), 1);
    EXPECT_EQ(value_of(page, "kad_tenant_quota_used{tenant=\"default\",quota=\"queues\"}"), 2);
    EXPECT_EQ(value_of(page, "kad_tenant_quota_limit{tenant=\"default\",quota=\"queues\"}"), 2);
    EXPECT_EQ(
        value_of(page, "kad_requests_total{method=\"kad.v1.Kad/FreeBuffer\",code=\"NOT_FOUND\"}"),
        1);
    EXPECT_EQ(
        value_of(
            page,
            "kad_requests_total{method=\"kad.v1.Kad/CreateQueue\",code=\"RESOURCE_EXHAUSTED\"}"),
        1);
    EXPECT_EQ(
        value_of(page, "kad_requests_total{method=\"kad.v1.Kad/AllocateBuffer\",code=\"OK\"}"), 2);
    EXPECT_EQ(value_of(page, "kad_queue_commands_failed_total{code=\"INVALID_ARGUMENT\"}"), 1);
    // Bounded labels: nothing the client chose, no session.
    EXPECT_THAT(page, Not(HasSubstr("client-chosen-name")));
    EXPECT_THAT(page, Not(HasSubstr("session=")));

    std::ofstream(dir + "/page.txt") << page;
    if (std::system("command -v promtool > /dev/null") == 0) {
      FILE* check = popen(("promtool check metrics < " + dir + "/page.txt 2>&1").c_str(), "r");
      std::string said;
      char line[512];
      while (fgets(line, sizeof(line), check) != nullptr) said += line;
      EXPECT_EQ(pclose(check), 0) << said;
      EXPECT_EQ(said, "") << "promtool has something to say about the page";
    } else {
      ADD_FAILURE()
          << "no promtool (Debian package prometheus; deploy/install-deps.sh installs it)";
    }
  }
  // The client left: its session goes, and the page says so.
  double sessions = -1;
  for (int i = 0; i < 500 && sessions != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    sessions = value_of(scrape(url), "kad_sessions");
  }
  EXPECT_EQ(sessions, 0);
  EXPECT_EQ(value_of(scrape(url), "kad_device_memory_bytes" + d), 0);
  std::filesystem::remove_all(dir);
}

TEST(Metrics, AMetricsAddressKadCannotUseStopsItNamingIt) {
  auto daemon = testing::Daemon::start({"--metrics", "udp://0.0.0.0:9"});
  ASSERT_FALSE(daemon.ok());
  EXPECT_THAT(std::string(daemon.status().message()),
              HasSubstr("--metrics `udp://0.0.0.0:9` is not tcp://HOST:PORT"));
}

}  // namespace
}  // namespace kad
