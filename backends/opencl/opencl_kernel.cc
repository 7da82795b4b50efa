#include "backends/opencl/opencl_kernel.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/opencl/opencl_info.h"
#include "backends/opencl/opencl_status.h"
#include "core/driver_scope.h"
#include "core/tune.h"

namespace kad::opencl {
namespace {

// The parameters the compiler saw after KAD_CONTEXT (which must come
// first). Fails closed where the driver keeps no argument info: a scalar
// passed where the kernel takes a pointer makes the driver dereference the
// client's bits (PoCL reads them as a cl_mem).
absl::StatusOr<std::vector<KernelParameter>> reflect_parameters(const OpenClDevice& device,
                                                                cl_kernel k,
                                                                absl::string_view entry) {
  const OpenClApi& api = device.api();
  cl_uint count = 0;
  if (absl::Status s =
          cl_status(api.clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof(count), &count, nullptr),
                    "clGetKernelInfo(CL_KERNEL_NUM_ARGS)");
      !s.ok()) {
    return s;
  }
  if (count == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("kernel `%s` has no parameters: the first must be KAD_CONTEXT", entry));
  }
  cl_kernel_arg_address_qualifier space = 0;
  if (api.clGetKernelArgInfo(k, 0, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof(space), &space,
                             nullptr) != CL_SUCCESS) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "kernel `%s`: device %s reports no argument info (asked for with -cl-kernel-arg-info), so "
        "kad cannot check its signature and will not launch it",
        entry, device.info().id));
  }
  // "struct kad_context" where the module went through SPIR-V.
  if (std::string type = query_string(api.clGetKernelArgInfo, k, 0, CL_KERNEL_ARG_TYPE_NAME);
      type != "kad_context" && type != "struct kad_context") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s`: the first parameter must be KAD_CONTEXT, not `%s`", entry, type));
  }
  std::vector<KernelParameter> parameters;
  for (cl_uint i = 1; i < count; ++i) {
    KernelParameter& p = parameters.emplace_back();
    api.clGetKernelArgInfo(k, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof(space), &space, nullptr);
    cl_kernel_arg_type_qualifier qualifiers = 0;
    api.clGetKernelArgInfo(k, i, CL_KERNEL_ARG_TYPE_QUALIFIER, sizeof(qualifiers), &qualifiers,
                           nullptr);
    switch (space) {
      case CL_KERNEL_ARG_ADDRESS_GLOBAL:
        p.space = KernelParameter::Space::kGlobal;
        break;
      case CL_KERNEL_ARG_ADDRESS_CONSTANT:
        p.space = KernelParameter::Space::kConstant;
        break;
      case CL_KERNEL_ARG_ADDRESS_LOCAL:
        p.space = KernelParameter::Space::kLocal;
        break;
      default:
        p.space = KernelParameter::Space::kPrivate;
    }
    p.is_const = (qualifiers & CL_KERNEL_ARG_TYPE_CONST) != 0;
    p.type = query_string(api.clGetKernelArgInfo, k, i, CL_KERNEL_ARG_TYPE_NAME);
    p.name = query_string(api.clGetKernelArgInfo, k, i, CL_KERNEL_ARG_NAME);
  }
  return parameters;
}

}  // namespace

absl::StatusOr<std::unique_ptr<OpenClKernel>> OpenClKernel::build(OpenClDevice& device,
                                                                  const CompileRequest& request,
                                                                  ProgramInput input) {
  // A build is the driver's work (LLVM's, in PoCL): its allocations, which
  // vary by a few from one build to the next, are the driver's; kad's own
  // here are per kernel, never per launch.
  DriverScope driver;
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
    const bool spir = input.kind == ProgramKind::kSpir;
    const unsigned char* binary = reinterpret_cast<const unsigned char*>(input.bytes.data());
    const size_t length = input.bytes.size();
    cl_int binary_status = CL_SUCCESS;
    k->program_ = api.clCreateProgramWithBinary(device.context(), 1, &id, &length, &binary,
                                                &binary_status, &err);
    if (err == CL_SUCCESS) err = binary_status;
    if (absl::Status s = cl_status(
            err, spir ? "clCreateProgramWithBinary (SPIR)" : "clCreateProgramWithBinary (driver)",
            sig.entry);
        !s.ok())
      return s;
    // -cl-kernel-arg-info here too, also for a driver binary: without it
    // PoCL hides the parameters' kinds, and a signature could not be
    // checked against them.
    options =
        absl::StrCat(spir ? "-x spir -spir-std=1.2 " : "", "-cl-kernel-arg-info ", request.options);
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
  {
    absl::MutexLock lock(&k->handles_mu_);
    k->handles_.push_back(std::make_unique<Lease::Handle>());
    k->handles_.back()->kernel = k->kernel_;
    k->first_ = k->handles_.back().get();
  }
  absl::StatusOr<std::vector<KernelParameter>> parameters =
      reflect_parameters(device, k->kernel_, sig.entry);
  if (!parameters.ok()) return parameters.status();
  if (absl::Status s = check_signature(sig, *parameters); !s.ok()) return s;
  k->parameters_ = *std::move(parameters);

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

absl::StatusOr<std::string> OpenClKernel::program_binary() const {
  const OpenClApi& api = device_.api();
  size_t size = 0;
  if (absl::Status s = cl_status(
          api.clGetProgramInfo(program_, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr),
          "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)", name_);
      !s.ok()) {
    return s;
  }
  if (size == 0) {
    return absl::UnimplementedError(
        absl::StrFormat("device %s gave no binary for kernel `%s`", device_.info().id, name_));
  }
  std::string binary(size, '\0');
  unsigned char* out = reinterpret_cast<unsigned char*>(binary.data());
  if (absl::Status s =
          cl_status(api.clGetProgramInfo(program_, CL_PROGRAM_BINARIES, sizeof(out), &out, nullptr),
                    "clGetProgramInfo(CL_PROGRAM_BINARIES)", name_);
      !s.ok()) {
    return s;
  }
  return binary;
}

OpenClKernel::Lease::~Lease() {
  if (handle_ != nullptr) handle_->in_use.Unlock();
}

cl_kernel OpenClKernel::Lease::get() const { return handle_->kernel; }

cl_int OpenClKernel::Lease::set_arg(const OpenClApi& api, cl_uint index, size_t size,
                                    const void* value) {
  Handle& h = *handle_;
  const bool cached = index < h.args.size() &&
                      (value == nullptr || (index == 0 ? size <= Handle::kLaunchContextBytes
                                                       : size <= sizeof(uint64_t)));
  if (!cached) return api.clSetKernelArg(h.kernel, index, size, value);
  Handle::SetArg& was = h.args[index];
  std::byte* bytes = index == 0 ? h.context.data() : reinterpret_cast<std::byte*>(&h.small[index]);
  if (was.set && was.size == size && was.local == (value == nullptr) &&
      (value == nullptr || std::memcmp(bytes, value, size) == 0))
    return CL_SUCCESS;
  const cl_int err = api.clSetKernelArg(h.kernel, index, size, value);
  // A refused value leaves the argument unknown: set again next time.
  was.set = err == CL_SUCCESS;
  was.size = static_cast<uint32_t>(size);
  was.local = value == nullptr;
  if (value != nullptr) std::memcpy(bytes, value, size);
  return err;
}

absl::StatusOr<OpenClKernel::Lease> OpenClKernel::lease() {
  // The warm launch: the first handle, free, without the list's lock.
  if (first_->in_use.TryLock()) return Lease(first_);
  {
    absl::MutexLock lock(&handles_mu_);
    for (const auto& h : handles_) {
      if (h->in_use.TryLock()) return Lease(h.get());
    }
    if (handles_.size() < kMaxHandles) {
      // Every handle is in a launch: one more, for good.
      cl_int err = CL_SUCCESS;
      cl_kernel more = device_.api().clCreateKernel(program_, name_.c_str(), &err);
      if (absl::Status s = cl_status(err, "clCreateKernel", name_); !s.ok()) return s;
      handles_.push_back(std::make_unique<Lease::Handle>());
      handles_.back()->kernel = more;
      handles_.back()->in_use.Lock();
      return Lease(handles_.back().get());
    }
  }
  first_->in_use.Lock();
  return Lease(first_);
}

OpenClKernel::~OpenClKernel() {
  const OpenClApi& api = device_.api();
  {
    absl::MutexLock lock(&handles_mu_);
    for (const auto& h : handles_) {
      if (h->kernel != kernel_) api.clReleaseKernel(h->kernel);
    }
  }
  if (kernel_) api.clReleaseKernel(kernel_);
  if (program_) api.clReleaseProgram(program_);
}

uint64_t OpenClKernel::launch_configuration(uint64_t nitems, uint64_t max_items) const {
  return spread_over_compute_units(limits_, device_.info().limits.compute_units, nitems, max_items);
}

}  // namespace kad::opencl
