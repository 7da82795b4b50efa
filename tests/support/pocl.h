// One way for tests to reach the real PoCL device and run kernels on it.
#pragma once

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/kernel.h"
#include "core/kernel_cache.h"
#include "core/launch.h"
#include "gtest/gtest.h"

namespace kad::testing {

// The PoCL CPU device, discovered once per process — or the device whose id
// KAD_TEST_DEVICE names (cuda:0 on a GPU machine). Fails the test (fatally)
// when there is none: every test machine has PoCL.
Device& pocl_device();

// Everything a launch test needs: the PoCL device, a queue and a fresh cache.
class PoclTest : public ::testing::Test {
 protected:
  void SetUp() override;

  // Creates an OpenCL C module and a kernel on it; ADD_FAILURE on error.
  std::unique_ptr<Kernel> make_kernel(const std::string& source, KernelSignature signature);

  // A buffer of `count` elements of T, each set to `fill` (poison).
  template <typename T>
  std::unique_ptr<Buffer> make_buffer(size_t count, T fill) {
    std::vector<T> host(count, fill);
    return upload(std::span<const T>(host));
  }
  template <typename T>
  std::unique_ptr<Buffer> upload(std::span<const T> data) {
    auto b = device().allocate(std::max<size_t>(data.size_bytes(), 1));
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok()) return nullptr;
    auto s = queue().write_buffer(**b, 0, std::as_bytes(data));
    EXPECT_TRUE(s.ok()) << s;
    return *std::move(b);
  }
  template <typename T>
  std::vector<T> download(const Buffer& buffer) {
    std::vector<T> host(buffer.size() / sizeof(T));
    auto s = queue().read_buffer(buffer, 0, std::as_writable_bytes(std::span(host)));
    EXPECT_TRUE(s.ok()) << s;
    return host;
  }

  // Launches and waits; returns the launch's result or its error.
  absl::StatusOr<LaunchResult> run(Kernel& kernel, const NdRange* ndrange, const Dims* workgroup,
                                   std::span<const KernelArg> args);

  Device& device() { return *device_; }
  Queue& queue() { return *queue_; }
  KernelCache& cache() { return cache_; }

 private:
  Device* device_ = nullptr;
  std::unique_ptr<Queue> queue_;
  KernelCache cache_;
};

}  // namespace kad::testing
