// A client process for end-to-end tests:
//   kad_test_client URI launches N SEED   N verified launches; exit 0 when all correct
//   kad_test_client URI hold READY_FILE   holds buffers and launches until killed
//   kad_test_client URI pipeline N        N launches, one wait at the end, verified once
//   kad_test_client URI stress N SEED     N pipelined launches, verified every 50
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "kad/client.h"
#include "tests/support/test_kernels.h"

namespace {

int fail(const char* what, const absl::Status& s) {
  std::fprintf(stderr, "kad_test_client: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using kad::client::Arg;
  using kad::client::ArgSpec;
  if (argc < 4) return 2;
  const std::string uri = argv[1], mode = argv[2];
  auto client = kad::Client::connect(uri, "kad_test_client");
  if (!client.ok()) return fail("connect", client.status());
  auto queue = (*client)->create_queue();
  if (!queue.ok()) return fail("queue", queue.status());
  auto module = (*client)->load_module(kad::testing::kAffineKernel);
  if (!module.ok()) return fail("module", module.status());
  auto kernel = (*client)->get_kernel(
      *module, {"affine",
                std::nullopt,
                std::nullopt,
                std::nullopt,
                {ArgSpec::buffer(), ArgSpec::scalar_of(kad::client::ScalarType::kI32),
                 ArgSpec::scalar_of(kad::client::ScalarType::kI32)},
                ""});
  if (!kernel.ok()) return fail("kernel", kernel.status());
  const int64_t n = 4096;
  auto out = (*client)->allocate(n * sizeof(int32_t));
  if (!out.ok()) return fail("allocate", out.status());

  if (mode == "hold") {
    for (int i = 0; i < 3; ++i) {
      if (!(*client)->allocate(1 << 20).ok()) return 1;
    }
    bool announced = false;
    for (int32_t k = 0;; ++k) {
      const Arg args[] = {Arg::buffer(*out), Arg::scalar<int32_t>(3), Arg::scalar(k)};
      auto l = (*queue)->launch(*kernel, kad::client::Dims{n}, nullptr, args);
      if (!l.ok()) return fail("launch", l.status());
      if (!announced) {
        std::ofstream(argv[3]) << "ready\n";
        announced = true;
      }
    }
  }

  if (mode == "pipeline") {
    const int32_t count = std::atoi(argv[3]);
    for (int32_t k = 0; k < count; ++k) {
      const Arg args[] = {Arg::buffer(*out), Arg::scalar<int32_t>(5), Arg::scalar(k)};
      auto l = (*queue)->launch(*kernel, kad::client::Dims{n}, nullptr, args);
      if (!l.ok()) return fail("launch", l.status());
    }
    if (auto s = (*queue)->wait(); !s.ok()) return fail("wait", s);
    std::vector<int32_t> host(n);
    if (auto s = (*queue)->read(*out, 0, std::as_writable_bytes(std::span(host))); !s.ok())
      return fail("read", s);
    for (int64_t i = 0; i < n; ++i)
      if (host[i] != static_cast<int32_t>(i) * 5 + count - 1) return 1;
    return 0;
  }

  if (mode == "stress") {
    const int32_t count = std::atoi(argv[3]);
    const int32_t seed = argc > 4 ? std::atoi(argv[4]) : 1;
    std::vector<int32_t> host(n);
    for (int32_t k = 0; k < count; ++k) {
      const Arg args[] = {Arg::buffer(*out), Arg::scalar(seed), Arg::scalar(k)};
      const kad::client::Dims range{n};
      if (auto s = (*queue)->submit(*kernel, &range, nullptr, args); !s.ok())
        return fail("submit", s);
      if (k % 50 == 49 || k == count - 1) {
        if (auto s = (*queue)->wait(); !s.ok()) return fail("wait", s);
        if (auto s = (*queue)->read(*out, 0, std::as_writable_bytes(std::span(host))); !s.ok())
          return fail("read", s);
        for (int64_t i = 0; i < n; ++i) {
          if (host[i] != static_cast<int32_t>(i) * seed + k) {
            std::fprintf(stderr, "kad_test_client: after launch %d element %lld is %d\n", k,
                         static_cast<long long>(i), host[i]);
            return 1;
          }
        }
      }
    }
    std::printf("%d launches submitted and verified (%s)\n", count,
                (*queue)->shared_memory() ? "shared memory" : "gRPC");
    return 0;
  }

  const int launches = std::atoi(argv[3]);
  const int32_t seed = argc > 4 ? std::atoi(argv[4]) : 1;
  std::vector<int32_t> host(n);
  for (int32_t k = 0; k < launches; ++k) {
    const Arg args[] = {Arg::buffer(*out), Arg::scalar(seed), Arg::scalar(k)};
    auto l = (*queue)->launch(*kernel, kad::client::Dims{n}, nullptr, args);
    if (!l.ok()) return fail("launch", l.status());
    if (auto s = (*queue)->read(*out, 0, std::as_writable_bytes(std::span(host))); !s.ok())
      return fail("read", s);
    for (int64_t i = 0; i < n; ++i) {
      if (host[i] != static_cast<int32_t>(i) * seed + k) {
        std::fprintf(stderr, "kad_test_client: launch %d element %lld is %d, want %d\n", k,
                     static_cast<long long>(i), host[i], static_cast<int32_t>(i) * seed + k);
        return 1;
      }
    }
  }
  std::printf("%d launches verified\n", launches);
  return 0;
}
