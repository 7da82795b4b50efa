// One way for tests to reach the devices and run kernels on them: every
// device the registry finds (the conformance suite, tests/conformance/), or
// the PoCL CPU device (the PoCL-specific suites).
#pragma once

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "core/backend.h"
#include "core/kernel.h"
#include "core/kernel_cache.h"
#include "core/launch.h"
#include "core/module.h"
#include "core/specialization.h"
#include "gtest/gtest.h"

namespace kad::testing {

// The registry's devices, discovered once per process.
const DeviceRegistry& test_registry();

// The devices the device-generic suites run on: every device the registry
// finds, or only the one whose id KAD_TEST_DEVICE names (none when it names
// no device: the suites then report discovery's log).
std::vector<Device*> test_devices();

// "opencl:pocl:0" -> "opencl_pocl_0": a device id as part of a test's name.
std::string test_name_of(const std::string& device_id);

// The PoCL CPU device — or the device whose id KAD_TEST_DEVICE names (cuda:0
// on a GPU machine). Fails the test (fatally) when there is none: every test
// machine has PoCL.
Device& pocl_device();

// Everything a launch test needs on one device: a queue on it and a fresh
// kernel cache. A fixture chooses the device in SetUp (use_device).
class DeviceTest : public ::testing::Test {
 protected:
  // Opens the queue; a fatal failure when the device has none to give.
  void use_device(Device& device);

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

// A DeviceTest on pocl_device().
class PoclTest : public DeviceTest {
 protected:
  void SetUp() override { use_device(pocl_device()); }
};

// The compile of `entry` (one buffer argument, rank 1) of OpenCL C `source`
// for `device`, with everything its CompileRequest refers to: for tests
// that drive a device's or a compile worker's compile directly.
struct SourceCompile {
  std::shared_ptr<const Module> module;
  KernelSignature signature;
  Specialization spec;
  SpecializationKey key;
  CompileRequest request() const {
    return {*module, signature, spec, key, specialised_source(spec, module->bytes()), ""};
  }
};
absl::StatusOr<SourceCompile> source_compile(const Device& device, const std::string& source,
                                             const std::string& entry);

}  // namespace kad::testing
