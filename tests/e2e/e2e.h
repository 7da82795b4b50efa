// Shared pieces of the end-to-end tests: a daemon per suite, clients on it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kad/client.h"
#include "tests/support/daemon.h"

namespace kad::testing {

// Starts one kad for a whole test suite (starting PoCL costs time).
class DaemonSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto d = Daemon::start();
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = d->release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static Daemon& daemon() { return *daemon_; }

  static std::unique_ptr<Client> connect(const std::string& uri, const std::string& name = "test") {
    auto c = Client::connect(uri, name);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  static inline Daemon* daemon_ = nullptr;
};

template <typename T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}
template <typename T>
std::span<std::byte> bytes_of(std::vector<T>& v) {
  return std::as_writable_bytes(std::span<T>(v));
}

// The kernel a bystander runs: fill(KAD_CONTEXT, global int* out, int v).
inline constexpr char kFillSource[] =
    "kernel void fill(KAD_CONTEXT, global int* out, int v) {\n"
    "  if (kad_active()) out[kad_global_linear()] = v;\n}\n";

// What every robustness test runs after its hostile client: a bystander's
// session on `uri` loads `source` (a `fill` as kFillSource declares it),
// fills 16 ints with `value` and reads them back. `shared_memory`: its queue
// must be a shared-memory channel.
inline void expect_bystander_served(const std::string& uri, int32_t value = 77,
                                    const std::string& source = kFillSource,
                                    bool shared_memory = false,
                                    const client::ConnectOptions& options = {}) {
  auto c = Client::connect(uri, "bystander", options);
  ASSERT_TRUE(c.ok()) << c.status();
  auto q = (*c)->create_queue();
  auto b = (*c)->allocate(16 * sizeof(int32_t));
  auto m = (*c)->load_module(source);
  ASSERT_TRUE(q.ok() && b.ok() && m.ok()) << m.status();
  auto k = (*c)->get_kernel(*m, {.entry = "fill",
                                 .args = {client::ArgSpec::buffer(),
                                          client::ArgSpec::scalar_of(client::ScalarType::kI32)}});
  ASSERT_TRUE(k.ok()) << k.status();
  if (shared_memory) {
    ASSERT_TRUE((*q)->shared_memory());
  }
  const client::Arg args[] = {client::Arg::buffer(*b), client::Arg::scalar<int32_t>(value)};
  ASSERT_TRUE((*q)->launch(*k, client::Dims{16}, nullptr, args).ok());
  std::vector<int32_t> got(16);
  ASSERT_TRUE((*q)->read(*b, 0, bytes_of(got)).ok());
  EXPECT_EQ(got, std::vector<int32_t>(16, value));
}

// kad's counters once the sessions that left have closed (kad learns that a
// client went a moment after it did): polls, at most 5 s, until the open
// sessions, buffers and queues are those of `baseline`.
inline client::ServiceStatus status_back_to(Client& observer,
                                            const client::ServiceStatus& baseline) {
  client::ServiceStatus now;
  for (int i = 0; i < 250; ++i) {
    auto s = observer.status();
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) break;
    now = *s;
    if (now.sessions == baseline.sessions && now.buffers == baseline.buffers &&
        now.queues == baseline.queues)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return now;
}

}  // namespace kad::testing
