// Shared pieces of the end-to-end tests: a daemon per suite, clients on it.
#pragma once

#include <memory>
#include <string>
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

}  // namespace kad::testing
