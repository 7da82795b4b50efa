// raw/ through the OpenCL API called directly: no kad code, the floor.
#include <CL/cl.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/runner.h"
#include "core/driver_scope.h"

namespace kad_bench {
namespace {

// The OpenCL device `info` names, through the ICD loader: the platform whose
// tag (as backends/opencl names them: "pocl" for PoCL, else the lower-cased
// first word of the platform's name, numbered from the second platform that
// shares it) is the id's, and the device at the id's index. NOT_FOUND when the
// loader does not list it (PoCL embedded in kad rather than installed as an
// ICD, for example).
absl::Status find_opencl_device(const kad::DeviceInfo& info, cl_platform_id* platform,
                                cl_device_id* device) {
  // "opencl:<tag>:<index>"
  const size_t last = info.id.rfind(':');
  const size_t first = info.id.find(':');
  int index = 0;
  if (first == std::string::npos || last == first ||
      !absl::SimpleAtoi(absl::string_view(info.id).substr(last + 1), &index) || index < 0) {
    return absl::InvalidArgumentError(absl::StrCat("not an OpenCL device id: ", info.id));
  }
  const std::string tag = info.id.substr(first + 1, last - first - 1);
  cl_uint count = 0;
  if (clGetPlatformIDs(0, nullptr, &count) != CL_SUCCESS || count == 0)
    return absl::NotFoundError("raw/: the OpenCL ICD loader lists no platform");
  std::vector<cl_platform_id> platforms(count);
  clGetPlatformIDs(count, platforms.data(), nullptr);
  std::map<std::string, int> seen;
  for (cl_platform_id p : platforms) {
    char name[256] = {};
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof(name) - 1, name, nullptr);
    std::string t;
    if (std::string(name) == "Portable Computing Language") {
      t = "pocl";
    } else {
      for (const char* c = name; *c != '\0' && *c != ' '; ++c)
        t += static_cast<char>(absl::ascii_tolower(static_cast<unsigned char>(*c)));
      if (t.empty()) t = "platform";
    }
    const int n = seen[t]++;
    if ((n == 0 ? t : absl::StrCat(t, n)) != tag) continue;
    cl_uint devices = 0;
    clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &devices);
    if (static_cast<cl_uint>(index) >= devices) break;
    std::vector<cl_device_id> ids(devices);
    clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, devices, ids.data(), nullptr);
    *platform = p;
    *device = ids[static_cast<size_t>(index)];
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrFormat(
      "raw/: the OpenCL ICD loader does not list %s (platform \"%s\"), so it cannot be called "
      "directly",
      info.id, info.platform));
}

class OpenClRawRunner final : public Runner {
 public:
  explicit OpenClRawRunner(const kad::DeviceInfo* device) : device_info_(device) {}
  ~OpenClRawRunner() override {
    if (last_) clReleaseEvent(last_);
    for (cl_mem m : mems_) clReleaseMemObject(m);
    if (kernel_) clReleaseKernel(kernel_);
    if (program_) clReleaseProgram(program_);
    if (queue_) clReleaseCommandQueue(queue_);
    if (context_) clReleaseContext(context_);
  }
  absl::Status setup(const Work& w) override {
    cl_platform_id platform;
    cl_int err = CL_SUCCESS;
    if (device_info_ == nullptr) {  // the first OpenCL device there is
      err = clGetPlatformIDs(1, &platform, nullptr);
      err |= clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device_, nullptr);
      if (err != CL_SUCCESS) return absl::UnavailableError("no OpenCL device");
    } else if (absl::Status s = find_opencl_device(*device_info_, &platform, &device_); !s.ok()) {
      return s;
    }
    context_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &err);
    queue_ = clCreateCommandQueue(context_, device_, 0, &err);
    const std::string src = w.source(true);
    const char* text = src.c_str();
    program_ = clCreateProgramWithSource(context_, 1, &text, nullptr, &err);
    if (clBuildProgram(program_, 1, &device_, "", nullptr, nullptr) != CL_SUCCESS)
      return absl::InternalError("raw kernel did not build");
    kernel_ = clCreateKernel(program_, w.kernel.c_str(), &err);
    const size_t bytes = static_cast<size_t>(w.items()) * w.element_bytes();
    layout_ = w.layout();
    for (char c : layout_)
      if (c != 'S')
        mems_.push_back(clCreateBuffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, &err));
    dims_ = static_cast<cl_uint>(w.shape.ndrange.size());
    for (cl_uint d = 0; d < dims_; ++d) global_[d] = static_cast<size_t>(w.shape.ndrange[d]);
    have_local_ = !w.shape.workgroup.empty();
    for (cl_uint d = 0; d < dims_; ++d)
      local_[d] = have_local_ && d < w.shape.workgroup.size() ? w.shape.workgroup[d] : 1;
    double_ = w.double_scalar();
    return absl::OkStatus();
  }
  // Everything here is the driver's: DriverScope keeps it out of kad_allocs.
  absl::Status launch() override {
    kad::DriverScope driver;
    const float af = 2.0f;
    const double ad = 2.0;
    size_t m = 0;
    for (cl_uint i = 0; i < layout_.size(); ++i) {
      if (layout_[i] != 'S')
        clSetKernelArg(kernel_, i, sizeof(cl_mem), &mems_[m++]);
      else if (double_)
        clSetKernelArg(kernel_, i, sizeof(double), &ad);
      else
        clSetKernelArg(kernel_, i, sizeof(float), &af);
    }
    cl_event e;
    if (clEnqueueNDRangeKernel(queue_, kernel_, dims_, nullptr, global_,
                               have_local_ ? local_ : nullptr, 0, nullptr, &e) != CL_SUCCESS)
      return absl::InternalError("clEnqueueNDRangeKernel failed");
    if (last_) clReleaseEvent(last_);
    last_ = e;
    return absl::OkStatus();
  }
  absl::Status wait() override {
    kad::DriverScope driver;
    if (last_) clWaitForEvents(1, &last_);
    return absl::OkStatus();
  }

 private:
  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  cl_program program_ = nullptr;
  cl_kernel kernel_ = nullptr;
  cl_event last_ = nullptr;
  std::vector<cl_mem> mems_;
  cl_uint dims_ = 1;
  size_t global_[3] = {1, 1, 1}, local_[3] = {1, 1, 1};
  bool have_local_ = false, double_ = false;
  std::string layout_;
  const kad::DeviceInfo* device_info_;
};

}  // namespace

std::unique_ptr<Runner> make_opencl_raw_runner(const kad::DeviceInfo* device) {
  return std::make_unique<OpenClRawRunner>(device);
}

}  // namespace kad_bench
