// A kernel compiled for one OpenCL device: its program, its cl_kernel and the
// limits the device reports for it.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "backends/opencl/cl.h"
#include "backends/opencl/opencl_device.h"
#include "core/backend.h"
#include "core/kernel.h"
#include "core/launch_context.h"

namespace kad::opencl {

// What a program is built from: OpenCL C source (the prelude's source form),
// SPIR 1.2 bitcode (an IR module linked with its specialisation), or the
// driver's own program binary (program_binary(), from another process).
enum class ProgramKind { kSource, kSpir, kDriverBinary };
struct ProgramInput {
  ProgramKind kind;
  absl::string_view bytes;
};

class OpenClKernel final : public CompiledKernel {
 public:
  // Builds `input` for `request`'s kernel; a failure returns the build log.
  static absl::StatusOr<std::unique_ptr<OpenClKernel>> build(OpenClDevice& device,
                                                             const CompileRequest& request,
                                                             ProgramInput input);
  ~OpenClKernel() override;

  const KernelLimits& limits() const override { return limits_; }
  // Enough items per group to fill every compute unit with at least one
  // group, in multiples of the preferred size, within the kernel's maximum.
  uint64_t launch_configuration(uint64_t nitems, uint64_t max_items) const override;
  const std::vector<KernelParameter>* parameters() const override { return &parameters_; }

  // The driver's binary of this kernel's program (CL_PROGRAM_BINARIES).
  absl::StatusOr<std::string> program_binary() const;

  const std::string& name() const { return name_; }
  cl_kernel handle() const { return kernel_; }

  // A cl_kernel of this kernel that no other thread holds, from taking to
  // the enqueue that follows its clSetKernelArg calls: those must not
  // interleave between threads. Where the driver runs the kernel inside the
  // enqueue (PoCL's basic), that is the kernel's whole run, so a launch
  // that finds the kernel's handle held takes another (made the first time
  // by clCreateKernel, then kept) rather than wait for the other launch to
  // end. kMaxHandles at most; past that, it waits for the first handle.
  class Lease {
   public:
    Lease(Lease&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    cl_kernel get() const;
    // clSetKernelArg on the leased cl_kernel, skipped where the argument
    // holds these bytes already (a cl_kernel keeps its arguments between
    // enqueues). PoCL frees and allocates an argument's storage at each
    // call: five per launch of a launch like the one before, which the
    // worker's pipelines spent a tenth of their time on. `value` null: a
    // local argument of `size` bytes.
    cl_int set_arg(const OpenClApi& api, cl_uint index, size_t size, const void* value);

   private:
    friend class OpenClKernel;
    struct Handle;
    explicit Lease(Handle* handle) : handle_(handle) {}
    Handle* handle_;
  };
  static constexpr size_t kMaxHandles = 64;
  absl::StatusOr<Lease> lease();

 private:
  OpenClKernel(OpenClDevice& device, std::string name) : device_(device), name_(std::move(name)) {}

  OpenClDevice& device_;
  std::string name_;
  cl_program program_ = nullptr;
  cl_kernel kernel_ = nullptr;
  KernelLimits limits_;
  std::vector<KernelParameter> parameters_;  // as the driver reports them
  // handles_[0] holds kernel_ (first_, fixed once built); the rest are
  // made as launches overlap.
  Lease::Handle* first_ = nullptr;
  absl::Mutex handles_mu_;
  std::vector<std::unique_ptr<Lease::Handle>> handles_ ABSL_GUARDED_BY(handles_mu_);
};

struct OpenClKernel::Lease::Handle {
  // An argument as it was last set on `kernel`; `bytes` holds values of up
  // to kLaunchContextBytes (the context, argument 0; the others are 8 at
  // most), local arguments only their size.
  static constexpr size_t kLaunchContextBytes = sizeof(LaunchContext);
  struct SetArg {
    bool set = false;
    bool local = false;
    uint32_t size = 0;
  };
  cl_kernel kernel = nullptr;
  absl::Mutex in_use;
  std::array<SetArg, kMaxKernelArgs + 1> args{};
  alignas(8) std::array<std::byte, kLaunchContextBytes> context{};
  std::array<uint64_t, kMaxKernelArgs + 1> small{};
};

}  // namespace kad::opencl
