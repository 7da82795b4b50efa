#include "backends/opencl/opencl_kernel.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/opencl/opencl_info.h"
#include "backends/opencl/opencl_status.h"
#include "core/driver_scope.h"

namespace kad::opencl {
namespace {

// Compares the parameters the compiler saw with the kernel's declared
// signature, so that a wrong declaration fails at compile time, by name.
absl::Status check_parameters(const OpenClApi& api, cl_kernel k, const KernelSignature& sig) {
  cl_uint count = 0;
  if (absl::Status s =
          cl_status(api.clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof(count), &count, nullptr),
                    "clGetKernelInfo(CL_KERNEL_NUM_ARGS)");
      !s.ok()) {
    return s;
  }
  if (count != sig.args.size() + 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s` has %d parameters after KAD_CONTEXT, its signature declares %d", sig.entry,
        count == 0 ? 0 : count - 1, sig.args.size()));
  }
  cl_kernel_arg_address_qualifier space = 0;
  if (api.clGetKernelArgInfo(k, 0, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof(space), &space,
                             nullptr) != CL_SUCCESS) {
    return absl::OkStatus();  // this driver keeps no argument info: launch-time checks remain
  }
  if (std::string type = query_string(api.clGetKernelArgInfo, k, 0, CL_KERNEL_ARG_TYPE_NAME);
      type != "kad_context") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s`: the first parameter must be KAD_CONTEXT, not `%s`", sig.entry, type));
  }
  for (cl_uint i = 1; i < count; ++i) {
    const ArgSpec& want = sig.args[i - 1];
    api.clGetKernelArgInfo(k, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof(space), &space, nullptr);
    cl_kernel_arg_type_qualifier qualifiers = 0;
    api.clGetKernelArgInfo(k, i, CL_KERNEL_ARG_TYPE_QUALIFIER, sizeof(qualifiers), &qualifiers,
                           nullptr);
    const std::string type = query_string(api.clGetKernelArgInfo, k, i, CL_KERNEL_ARG_TYPE_NAME);
    const std::string name = query_string(api.clGetKernelArgInfo, k, i, CL_KERNEL_ARG_NAME);
    bool ok = false;
    switch (want.kind) {
      case ArgKind::kBuffer:
        ok = space == CL_KERNEL_ARG_ADDRESS_GLOBAL;
        break;
      case ArgKind::kConstBuffer:
        ok = (space == CL_KERNEL_ARG_ADDRESS_GLOBAL || space == CL_KERNEL_ARG_ADDRESS_CONSTANT) &&
             (qualifiers & CL_KERNEL_ARG_TYPE_CONST);
        break;
      case ArgKind::kLocal:
        ok = space == CL_KERNEL_ARG_ADDRESS_LOCAL;
        break;
      case ArgKind::kScalar:
        ok = space == CL_KERNEL_ARG_ADDRESS_PRIVATE && type == scalar_type_name(want.scalar);
        break;
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "kernel `%s`: argument %d is declared a %s but the kernel's parameter `%s` has type "
          "`%s%s`",
          sig.entry, i - 1, to_string(want), name,
          (qualifiers & CL_KERNEL_ARG_TYPE_CONST) ? "const " : "", type));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<OpenClKernel>> OpenClKernel::build(OpenClDevice& device,
                                                                  const CompileRequest& request,
                                                                  ProgramInput input) {
  const OpenClApi& api = device.api();
  const KernelSignature& sig = request.signature;
  std::unique_ptr<OpenClKernel> k(new OpenClKernel(device, sig.entry));

  cl_device_id id = device.device_id();
  cl_int err = CL_SUCCESS;
  std::string options;
  if (input.kind == ProgramKind::kSource) {
    const char* text = input.bytes.data();
    const size_t length = input.bytes.size();
    k->program_ = api.clCreateProgramWithSource(device.context(), 1, &text, &length, &err);
    if (absl::Status s = cl_status(err, "clCreateProgramWithSource", sig.entry); !s.ok()) return s;
    options = absl::StrCat("-cl-std=CL1.2 -cl-kernel-arg-info ", request.options);
  } else {
    const unsigned char* binary = reinterpret_cast<const unsigned char*>(input.bytes.data());
    const size_t length = input.bytes.size();
    cl_int binary_status = CL_SUCCESS;
    k->program_ = api.clCreateProgramWithBinary(device.context(), 1, &id, &length, &binary,
                                                &binary_status, &err);
    if (err == CL_SUCCESS) err = binary_status;
    if (absl::Status s = cl_status(err, "clCreateProgramWithBinary (SPIR)", sig.entry); !s.ok())
      return s;
    options = absl::StrCat("-x spir -spir-std=1.2 ", request.options);
  }

  err = api.clBuildProgram(k->program_, 1, &id, options.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s` did not compile for device %s (%s, options `%s`):\n%s", sig.entry,
        device.info().id, error_name(err), options,
        query_string(api.clGetProgramBuildInfo, k->program_, id, CL_PROGRAM_BUILD_LOG)));
  }
  k->kernel_ = api.clCreateKernel(k->program_, sig.entry.c_str(), &err);
  if (err == CL_INVALID_KERNEL_NAME) {
    return absl::NotFoundError(absl::StrFormat("module has no kernel named `%s`", sig.entry));
  }
  if (absl::Status s = cl_status(err, "clCreateKernel", sig.entry); !s.ok()) return s;
  if (absl::Status s = check_parameters(api, k->kernel_, sig); !s.ok()) return s;

  size_t max_items = 0, multiple = 0;
  cl_ulong local = 0;
  for (auto [what, size, out] :
       {std::tuple<cl_kernel_work_group_info, size_t, void*>{CL_KERNEL_WORK_GROUP_SIZE,
                                                             sizeof(max_items), &max_items},
        {CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, sizeof(multiple), &multiple},
        {CL_KERNEL_LOCAL_MEM_SIZE, sizeof(local), &local}}) {
    if (absl::Status s =
            cl_status(api.clGetKernelWorkGroupInfo(k->kernel_, id, what, size, out, nullptr),
                      "clGetKernelWorkGroupInfo", sig.entry);
        !s.ok()) {
      return s;
    }
  }
  k->limits_.max_workgroup_size = max_items;
  k->limits_.preferred_multiple = std::max<size_t>(multiple, 1);
  k->limits_.local_memory_bytes = local;
  return k;
}

OpenClKernel::~OpenClKernel() {
  const OpenClApi& api = device_.api();
  if (kernel_) api.clReleaseKernel(kernel_);
  if (program_) api.clReleaseProgram(program_);
}

uint64_t OpenClKernel::launch_configuration(uint64_t nitems, uint64_t max_items) const {
  const uint64_t multiple = limits_.preferred_multiple;
  const uint64_t cap = std::max<uint64_t>(1, std::min(limits_.max_workgroup_size, max_items));
  const uint64_t units = std::max<uint64_t>(1, device_.info().limits.compute_units);
  // Items per group so that every compute unit gets a group, rounded up to
  // the preferred multiple.
  uint64_t threads = (nitems + units - 1) / units;
  threads = (threads + multiple - 1) / multiple * multiple;
  return std::clamp<uint64_t>(threads, std::min(multiple, cap), cap);
}

}  // namespace kad::opencl
