// kad restarts (a crash, an upgrade) under live clients: a client of the
// old kad gets a clear error, promptly, on every transport, and never hangs
// or crashes; a new client on the same address gets a new session from the
// new kad and launches as before (DESIGN §11).
#include <signal.h>

#include <chrono>
#include <future>
#include <thread>

#include "client/src/connection.h"
#include "gmock/gmock.h"
#include "tests/e2e/e2e.h"

namespace kad {
namespace {

using client::Arg;
using client::ArgSpec;
using ::testing::HasSubstr;

constexpr char kAddOne[] =
    "kernel void add_one(KAD_CONTEXT, global int* x) {\n"
    "  if (kad_active()) x[kad_global_linear()] += 1;\n}\n";
constexpr int kItems = 64;

struct Tenant {
  std::unique_ptr<Client> client;
  std::unique_ptr<client::Queue> queue;
  client::Buffer buffer;
  client::Kernel kernel;
};

Tenant open_tenant(const std::string& uri) {
  Tenant t;
  auto c = Client::connect(uri, "restart");
  EXPECT_TRUE(c.ok()) << uri << ": " << c.status();
  if (!c.ok()) return t;
  t.client = *std::move(c);
  auto q = t.client->create_queue();
  auto b = t.client->allocate(kItems * sizeof(int32_t));
  auto m = t.client->load_module(kAddOne);
  EXPECT_TRUE(q.ok() && b.ok() && m.ok()) << uri;
  if (!q.ok() || !b.ok() || !m.ok()) return t;
  auto k = t.client->get_kernel(*m, {.entry = "add_one", .args = {ArgSpec::buffer()}});
  EXPECT_TRUE(k.ok()) << uri << ": " << k.status();
  if (!k.ok()) return t;
  t.queue = *std::move(q);
  t.buffer = *b;
  t.kernel = *k;
  return t;
}

// Writes `from`, adds one on the device, reads back; the status of the
// first step that failed.
absl::Status add_one(Tenant& t, int32_t from) {
  std::vector<int32_t> x(kItems, from);
  absl::Status s = t.queue->write(t.buffer, 0, testing::bytes_of(x));
  if (!s.ok()) return s;
  const Arg args[] = {Arg::buffer(t.buffer)};
  if (auto launched = t.queue->launch(t.kernel, client::Dims{kItems}, nullptr, args);
      !launched.ok()) {
    return launched.status();
  }
  if (s = t.queue->read(t.buffer, 0, testing::bytes_of(x)); !s.ok()) return s;
  for (int32_t v : x) {
    if (v != from + 1) return absl::DataLossError(absl::StrCat("read ", v, " for ", from + 1));
  }
  return absl::OkStatus();
}

TEST(DaemonRestart, OldClientsGetAClearErrorPromptlyAndNewClientsServeOnTheSameAddress) {
  auto daemon = testing::Daemon::start();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::vector<std::string> uris = {(*daemon)->unix_uri(),  // shared memory
                                         (*daemon)->unix_uri() + "?transport=grpc",
                                         (*daemon)->tcp_uri()};
  std::vector<Tenant> old;
  for (const std::string& uri : uris) {
    old.push_back(open_tenant(uri));
    ASSERT_NE(old.back().queue, nullptr);
    ASSERT_TRUE(add_one(old.back(), 41).ok()) << uri;
  }

  ASSERT_TRUE((*daemon)->restart().ok()) << (*daemon)->log();
  const std::string gone = "kad no longer holds session `";

  for (size_t i = 0; i < uris.size(); ++i) {
    // Bounded: a client of a kad that is gone must not wait for it forever.
    auto outcome = std::async(std::launch::async, [&t = old[i]] { return add_one(t, 7); });
    ASSERT_EQ(outcome.wait_for(std::chrono::seconds(20)), std::future_status::ready)
        << uris[i] << ": the old client still waits for the kad that is gone";
    const absl::Status s = outcome.get();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << uris[i] << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(gone)) << uris[i] << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("connect again")) << uris[i];
    // Asked again, and through the other calls: the same answer, no hang.
    EXPECT_EQ(add_one(old[i], 7).code(), absl::StatusCode::kUnavailable) << uris[i];
    auto allocated = old[i].client->allocate(64);
    EXPECT_EQ(allocated.status().code(), absl::StatusCode::kUnavailable) << uris[i];
    EXPECT_THAT(std::string(allocated.status().message()), HasSubstr(gone)) << uris[i];
    // kad's status is kad's, not a session's: the new kad answers it.
    EXPECT_TRUE(old[i].client->status().ok()) << uris[i];
  }
  for (const std::string& uri : uris) {
    Tenant fresh = open_tenant(uri);
    ASSERT_NE(fresh.queue, nullptr) << uri;
    EXPECT_TRUE(add_one(fresh, 99).ok()) << uri;
  }
  old.clear();  // a client of the old kad closes without hanging
}

// kad's own UNAVAILABLE answers (a draining kad, a worker that cannot
// start) keep their words while the session lives; once kad is gone, any
// UNAVAILABLE is the session's end and says so.
TEST(DaemonRestart, AnUnavailableAnswerIsASessionsEndOnlyOnceItsStreamHasEnded) {
  auto daemon = testing::Daemon::start();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  absl::StatusOr<std::shared_ptr<client::Connection>> c =
      client::open_connection((*daemon)->tcp_uri(), {});
  ASSERT_TRUE(c.ok()) << c.status();
  v1::OpenSessionRequest request;
  request.set_client_name("classify");
  ASSERT_TRUE((*c)->open_session(request).ok());
  const grpc::Status kads_own(grpc::StatusCode::UNAVAILABLE, "a worker for X did not start");
  EXPECT_FALSE((*c)->session_lost());
  EXPECT_EQ((*c)->status_of(kads_own).message(), "a worker for X did not start");

  (*daemon)->stop(SIGKILL);
  EXPECT_TRUE((*c)->session_lost(absl::Seconds(5)));
  const absl::Status gone = (*c)->status_of(kads_own);
  EXPECT_EQ(gone.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(gone.message()), HasSubstr("kad no longer holds session `"));
}

}  // namespace
}  // namespace kad
