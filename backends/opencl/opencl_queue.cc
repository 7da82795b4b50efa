#include "backends/opencl/opencl_queue.h"

#include "absl/strings/str_format.h"
#include "backends/opencl/opencl_buffer.h"
#include "backends/opencl/opencl_kernel.h"
#include "backends/opencl/opencl_status.h"
#include "core/driver_scope.h"

namespace kad::opencl {

absl::StatusOr<std::unique_ptr<OpenClQueue>> OpenClQueue::create(OpenClDevice& device) {
  cl_int err = CL_SUCCESS;
  cl_command_queue q = device.api().clCreateCommandQueue(
      device.context(), device.device_id(),
      device.timed_queues() ? CL_QUEUE_PROFILING_ENABLE : cl_command_queue_properties{0}, &err);
  if (absl::Status s = cl_status(err, "clCreateCommandQueue", device.info().id); !s.ok()) return s;
  return std::unique_ptr<OpenClQueue>(new OpenClQueue(device, q));
}

OpenClQueue::~OpenClQueue() {
  const OpenClApi& api = device_.api();
  api.clFinish(queue_);
  absl::MutexLock lock(&mu_);
  for (cl_event& e : ring_) {
    if (e) api.clReleaseEvent(e);
  }
  api.clReleaseCommandQueue(queue_);
}

EventId OpenClQueue::record(cl_event event) {
  const EventId id = next_++;
  cl_event& slot = ring_[id % kRing];
  if (slot) device_.api().clReleaseEvent(slot);
  slot = event;
  return id;
}

absl::StatusOr<EventId> OpenClQueue::enqueue_kernel(CompiledKernel& compiled,
                                                    const LaunchGeometry& geometry,
                                                    const LaunchContext& context,
                                                    std::span<const KernelArg> args) {
  absl::MutexLock lock(&mu_);
  cl_event event = nullptr;
  if (absl::Status s = enqueue(compiled, geometry, context, args, &event); !s.ok()) return s;
  DriverScope driver;
  device_.api().clFlush(queue_);  // start now: the caller may wait much later
  return record(event);
}

absl::Status OpenClQueue::run_kernel(CompiledKernel& compiled, const LaunchGeometry& geometry,
                                     const LaunchContext& context,
                                     std::span<const KernelArg> args) {
  cl_event event = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = enqueue(compiled, geometry, context, args, &event); !s.ok()) return s;
  }
  return wait_and_release(event);
}

absl::Status OpenClQueue::wait_and_release(cl_event event) {
  const OpenClApi& api = device_.api();
  DriverScope driver;
  // A driver that ran the kernel in its enqueue (PoCL's `basic` in a
  // worker) has ended it: the wait, which flushes the queue, is skipped.
  cl_int status = CL_QUEUED;
  cl_int err = api.clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status,
                                  nullptr);
  if (err != CL_SUCCESS || status > CL_COMPLETE) {
    err = api.clWaitForEvents(1, &event);
    status = CL_COMPLETE;
    api.clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr);
  }
  api.clReleaseEvent(event);
  if (status < 0) return cl_status(status, "kernel execution");
  return cl_status(err, "clWaitForEvents");
}

absl::Status OpenClQueue::enqueue(CompiledKernel& compiled, const LaunchGeometry& geometry,
                                  const LaunchContext& context, std::span<const KernelArg> args,
                                  cl_event* event) {
  // Core validated the arguments against this device: buffers are ours.
  auto& kernel = static_cast<OpenClKernel&>(compiled);
  const OpenClApi& api = device_.api();
  size_t global[3], local[3];
  for (size_t d = 0; d < 3; ++d) {
    local[d] = geometry.items[d];
    global[d] = geometry.groups[d] * geometry.items[d];
  }
  absl::StatusOr<OpenClKernel::Lease> lease = kernel.lease();
  if (!lease.ok()) return lease.status();
  DriverScope driver;
  cl_kernel k = lease->get();
  cl_int err = lease->set_arg(api, 0, sizeof(LaunchContext), &context);
  for (cl_uint i = 0; err == CL_SUCCESS && i < args.size(); ++i) {
    const KernelArg& a = args[i];
    switch (a.kind) {
      case ArgKind::kBuffer:
      case ArgKind::kConstBuffer: {
        cl_mem mem = static_cast<const OpenClBuffer*>(a.buffer)->mem();
        err = lease->set_arg(api, i + 1, sizeof(cl_mem), &mem);
        break;
      }
      case ArgKind::kScalar:
        err = lease->set_arg(api, i + 1, scalar_type_size(a.scalar), &a.bits);
        break;
      case ArgKind::kLocal:
        err = lease->set_arg(api, i + 1, a.local_bytes, nullptr);
        break;
    }
  }
  if (err != CL_SUCCESS) return cl_status(err, "clSetKernelArg", kernel.name());
  err = api.clEnqueueNDRangeKernel(queue_, k, 3, nullptr, global, local, 0, nullptr, event);
  if (err != CL_SUCCESS) {
    return cl_status(
        err, "clEnqueueNDRangeKernel",
        absl::StrFormat("kernel `%s`, global (%d, %d, %d), local (%d, %d, %d)", kernel.name(),
                        global[0], global[1], global[2], local[0], local[1], local[2]));
  }
  return absl::OkStatus();
}

absl::Status OpenClQueue::write_buffer(Buffer& buffer, uint64_t offset,
                                       std::span<const std::byte> data) {
  if (absl::Status s = check_transfer(*this, buffer, offset, data.size()); !s.ok()) return s;
  if (data.empty()) return absl::OkStatus();
  DriverScope driver;
  return cl_status(
      device_.api().clEnqueueWriteBuffer(queue_, static_cast<OpenClBuffer&>(buffer).mem(), CL_TRUE,
                                         offset, data.size(), data.data(), 0, nullptr, nullptr),
      "clEnqueueWriteBuffer");
}

absl::Status OpenClQueue::read_buffer(const Buffer& buffer, uint64_t offset,
                                      std::span<std::byte> data) {
  if (absl::Status s = check_transfer(*this, buffer, offset, data.size()); !s.ok()) return s;
  if (data.empty()) return absl::OkStatus();
  DriverScope driver;
  return cl_status(device_.api().clEnqueueReadBuffer(
                       queue_, static_cast<const OpenClBuffer&>(buffer).mem(), CL_TRUE, offset,
                       data.size(), data.data(), 0, nullptr, nullptr),
                   "clEnqueueReadBuffer");
}

absl::Status OpenClQueue::wait(EventId id) {
  if (id == 0) return absl::OkStatus();
  const OpenClApi& api = device_.api();
  cl_event event;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = check_issued(id, next_); !s.ok()) return s;
    event = ring_[oldest_held_event(id, next_, kRing) % kRing];
    DriverScope driver;
    api.clRetainEvent(event);
  }
  return wait_and_release(event);
}

bool OpenClQueue::ended(EventId id) {
  absl::MutexLock lock(&mu_);
  if (id == 0 || id >= next_) return id == 0;
  cl_event event = ring_[oldest_held_event(id, next_, kRing) % kRing];
  cl_int status = CL_QUEUED;
  DriverScope driver;
  return device_.api().clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status),
                                      &status, nullptr) == CL_SUCCESS &&
         status == CL_COMPLETE;
}

namespace {

void CL_CALLBACK call_back(cl_event, cl_int status, void* user) {
  auto* callback = static_cast<EndCallback*>(user);
  // CL_COMPLETE is 0; a launch that failed ends with its (negative) error.
  if (status >= 0)
    callback->ended(callback, absl::OkStatus());
  else
    callback->ended(callback, cl_status(status, "kernel execution"));
}

}  // namespace

bool OpenClQueue::notify_ended(EventId id, EndCallback* callback) {
  absl::MutexLock lock(&mu_);
  // Only an event the ring still holds: an older one was released.
  if (id == 0 || id >= next_ || next_ - id > kRing) return false;
  DriverScope driver;
  return device_.api().clSetEventCallback(ring_[id % kRing], CL_COMPLETE, &call_back, callback) ==
         CL_SUCCESS;
}

std::optional<DeviceTimes> OpenClQueue::device_times(EventId id) {
  absl::MutexLock lock(&mu_);
  // Only an event the ring still holds: an older one was released.
  if (id == 0 || id >= next_ || next_ - id > kRing) return std::nullopt;
  const OpenClApi& api = device_.api();
  cl_event event = ring_[id % kRing];
  cl_ulong start = 0, end = 0;
  DriverScope driver;
  if (api.clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_START, sizeof(start), &start,
                                  nullptr) != CL_SUCCESS ||
      api.clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof(end), &end, nullptr) !=
          CL_SUCCESS ||
      end < start)
    return std::nullopt;
  return DeviceTimes{start, end};
}

absl::Status OpenClQueue::finish() {
  DriverScope driver;
  return cl_status(device_.api().clFinish(queue_), "clFinish");
}

}  // namespace kad::opencl
