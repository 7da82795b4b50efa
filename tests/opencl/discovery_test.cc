// Device discovery: PoCL appears exactly once, whether the ICD loader lists
// it or kad loads it directly as the embedded default; every limit a device
// reports is the driver's answer for that device, or kad's stated derivation.
#include <string>
#include <vector>

#include "backends/opencl/opencl_backend.h"
#include "backends/opencl/opencl_device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kad::opencl {
namespace {

using ::testing::HasSubstr;

int count_pocl(const Discovery& d) {
  int n = 0;
  for (const auto& dev : d.devices) n += dev->info().platform == kPoclPlatformName;
  return n;
}

TEST(Discovery, PoclAppearsOnceThroughTheIcdLoader) {
  Discovery d = discover();
  EXPECT_EQ(count_pocl(d), 1);
}

TEST(Discovery, PoclIsTheEmbeddedDefaultWithoutAnIcdLoader) {
  Discovery d = discover({.icd_loader = "libkad-no-such-icd-loader.so.1"});
  EXPECT_EQ(count_pocl(d), 1);
  ASSERT_FALSE(d.log.empty());
  EXPECT_THAT(d.log.front(), HasSubstr("ICD loader unavailable"));
  EXPECT_THAT(d.log.back(), HasSubstr("(embedded)"));
}

TEST(Discovery, EachMissingLibraryIsOneLogLine) {
  Discovery d = discover({.icd_loader = "libkad-no-such-icd-loader.so.1",
                          .embedded_pocl = "libkad-no-such-pocl.so.2"});
  EXPECT_TRUE(d.devices.empty());
  ASSERT_EQ(d.log.size(), 2u);
  EXPECT_THAT(d.log[0], HasSubstr("libkad-no-such-icd-loader.so.1"));
  EXPECT_THAT(d.log[1], HasSubstr("libkad-no-such-pocl.so.2"));
}

// The driver's own answer to one clGetDeviceInfo query, through the same
// entry point kad's device holds, for the same cl_device_id.
template <typename T>
T driver_value(const OpenClDevice& dev, cl_device_info what) {
  T value{};
  size_t size = 0;
  EXPECT_EQ(dev.api().clGetDeviceInfo(dev.device_id(), what, sizeof(T), &value, &size), CL_SUCCESS)
      << "clGetDeviceInfo(" << what << ")";
  EXPECT_EQ(size, sizeof(T)) << "clGetDeviceInfo(" << what << ")";
  return value;
}

std::string driver_string(const OpenClDevice& dev, cl_device_info what) {
  size_t size = 0;
  EXPECT_EQ(dev.api().clGetDeviceInfo(dev.device_id(), what, 0, nullptr, &size), CL_SUCCESS);
  std::string value(size, '\0');
  EXPECT_EQ(dev.api().clGetDeviceInfo(dev.device_id(), what, size, value.data(), nullptr),
            CL_SUCCESS);
  while (!value.empty() && value.back() == '\0') value.pop_back();
  return value;
}

TEST(Discovery, DeviceLimitsAreTheDriversAnswersForTheSameDevice) {
  Discovery d = discover();
  ASSERT_FALSE(d.devices.empty());
  for (const auto& device : d.devices) {
    SCOPED_TRACE(device->info().id);
    const auto* dev = dynamic_cast<const OpenClDevice*>(device.get());
    ASSERT_NE(dev, nullptr) << "the OpenCL backend found a device that is not an OpenClDevice";
    const DeviceLimits& l = dev->info().limits;

    EXPECT_EQ(l.max_workgroup_size, driver_value<size_t>(*dev, CL_DEVICE_MAX_WORK_GROUP_SIZE));
    EXPECT_EQ(l.compute_units, driver_value<cl_uint>(*dev, CL_DEVICE_MAX_COMPUTE_UNITS));
    EXPECT_EQ(l.global_memory_bytes, driver_value<cl_ulong>(*dev, CL_DEVICE_GLOBAL_MEM_SIZE));
    EXPECT_EQ(l.max_allocation_bytes, driver_value<cl_ulong>(*dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
    EXPECT_EQ(l.local_memory_bytes, driver_value<cl_ulong>(*dev, CL_DEVICE_LOCAL_MEM_SIZE));
    EXPECT_EQ(l.max_parameter_bytes, driver_value<size_t>(*dev, CL_DEVICE_MAX_PARAMETER_SIZE));

    // Items per dimension: the driver's first three; 1 beyond its dimensions.
    const cl_uint dims = driver_value<cl_uint>(*dev, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS);
    ASSERT_GE(dims, 1u);
    std::vector<size_t> sizes(dims);
    ASSERT_EQ(dev->api().clGetDeviceInfo(dev->device_id(), CL_DEVICE_MAX_WORK_ITEM_SIZES,
                                         sizeof(size_t) * dims, sizes.data(), nullptr),
              CL_SUCCESS);
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(l.max_workgroup_dims[i], i < dims ? sizes[i] : 1u) << "dimension " << i;

    // Derived by kad, not asked: OpenCL bounds the global size, not the
    // number of groups, except that PoCL counts a launch's groups in 32 bits;
    // OpenCL 1.2 reports no subgroup width, so kad assumes 1.
    const bool pocl = dev->info().platform == kPoclPlatformName;
    const uint64_t groups = pocl ? uint64_t{0xFFFFFFFF} : kUnlimited;
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(l.max_groups[i], groups) << "dimension " << i;
    EXPECT_EQ(l.subgroup_width, 1u);

    // The compiler's version, part of every cache key: the device's own words.
    EXPECT_EQ(dev->info().toolchain_version, driver_string(*dev, CL_DEVICE_VERSION) + "; " +
                                                 driver_string(*dev, CL_DEVICE_OPENCL_C_VERSION));
  }
}

}  // namespace
}  // namespace kad::opencl
