// The backend interface (DESIGN §1-§3): what a vendor backend implements so
// that the one launch pipeline in core/ runs on its devices.
//
// The shape follows the vendors' own: a device owns memory, queues and
// compiled kernels; queues are in order and report completion by increasing
// event ids (a CUDA event, an HSA signal value, a Level Zero event, an OpenCL
// event). A backend only translates: partition, select, tune and validation
// stay in core/.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/device_limits.h"
#include "core/kernel_signature.h"
#include "core/launch_context.h"
#include "core/launch_geometry.h"
#include "core/launch_request.h"
#include "core/module.h"
#include "core/specialization.h"

namespace kad {

class Device;
class Kernel;
class Queue;

struct DeviceInfo {
  std::string backend;  // "opencl", "cuda", ...
  std::string id;       // unique on this machine, stable across restarts
  std::string name;
  std::string vendor;
  std::string platform;
  std::string driver_version;
  std::string toolchain_version;  // part of every specialisation key
  bool is_cpu = false;
  // The device computes on host memory directly (PoCL, integrated GPUs): a
  // buffer can live in memory kad shares with a client (zero-copy).
  bool host_visible = false;
  DeviceLimits limits;                // queried once, when the backend starts
  std::vector<ModuleFormat> formats;  // what the device consumes
};

// Host memory that a device may compute on directly: mapped at `data` in
// this process, and backed by the file `fd` (a memfd) when the memory must
// also reach another process (a worker, DESIGN §8); -1 otherwise.
struct HostMemoryRef {
  void* data = nullptr;
  uint64_t bytes = 0;
  int fd = -1;
};

// Device memory. Owned by whoever allocated it; freed when destroyed.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual uint64_t size() const = 0;
  virtual const Device& device() const = 0;
};

// A kernel compiled for one device and one Specialization.
class CompiledKernel {
 public:
  virtual ~CompiledKernel() = default;
  virtual const KernelLimits& limits() const = 0;
  // Tuning hook (DESIGN §3.4): work-items per workgroup that suit this kernel
  // for a launch of `nitems` items, at most `max_items`. Must not allocate.
  virtual uint64_t launch_configuration(uint64_t nitems, uint64_t max_items) const = 0;
  // The kernel's parameters after KAD_CONTEXT, as the driver reports them;
  // null where the backend cannot tell (it checked the count and kinds it
  // can see when it compiled). The cache keeps them per module and entry, so
  // that GetKernel can check another signature before any launch.
  virtual const std::vector<KernelParameter>* parameters() const { return nullptr; }
  // Bytes of the daemon's own memory it holds, such as a program binary kept
  // to load into workers (0 where the driver holds what it needs): what the
  // KernelCache counts against its byte bound. Fixed once compiled.
  virtual uint64_t host_bytes() const { return 0; }

  // When a launch last used it, by the KernelCache's clock: what the cache's
  // least-recently-used eviction reads. Relaxed: an order of uses, no fence.
  void touch(uint64_t tick) const { last_used_.store(tick, std::memory_order_relaxed); }
  uint64_t last_used() const { return last_used_.load(std::memory_order_relaxed); }

 private:
  mutable std::atomic<uint64_t> last_used_{0};
};

// Code lowered for a compile (Device::lower_ahead), under the key that
// KernelLowering files it by in the code cache.
struct LoweredCode {
  std::string key;
  std::string code;
};

// Everything a backend needs to compile one specialised kernel.
struct CompileRequest {
  const Module& module;
  const KernelSignature& signature;
  const Specialization& spec;
  const SpecializationKey& key;  // names the result in the in-memory and on-disk caches
  std::string source;            // OpenCL C modules: defines + prelude + user source
  std::string options;           // the kernel's build options and the backend's compiler_options
};

// When a launch started and ended on its device: nanoseconds on the
// device's clock, which all queues of the device share.
struct DeviceTimes {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

// What a driver calls when a launch ends (Queue::notify_ended): a record of
// the caller's, which may hold more behind it, so that asking allocates
// nothing. `status` is the launch's: OK, or what failed.
struct EndCallback {
  void (*ended)(EndCallback* self, const absl::Status& status) = nullptr;
};

// An in-order queue on one device. Commands run in submission order; waiting
// for an event also waits for everything submitted before it.
class Queue {
 public:
  virtual ~Queue() = default;
  virtual Device& device() const = 0;
  // The warm path: must not allocate in kad's code.
  virtual absl::StatusOr<EventId> enqueue_kernel(CompiledKernel& kernel,
                                                 const LaunchGeometry& geometry,
                                                 const LaunchContext& context,
                                                 std::span<const KernelArg> args) = 0;
  // Copies after all earlier commands; returns when the copy is done.
  virtual absl::Status write_buffer(Buffer& buffer, uint64_t offset,
                                    std::span<const std::byte> data) = 0;
  virtual absl::Status read_buffer(const Buffer& buffer, uint64_t offset,
                                   std::span<std::byte> data) = 0;
  // write_buffer of the pieces' bytes, in order, written at `offset` one
  // after the other: a transfer as it arrived from the network, in several
  // slices. The default gathers them into one block first and calls
  // write_buffer; a queue whose buffers the host writes directly copies each
  // piece into place, and then must override both (its write_buffer may call
  // this one, never the default).
  virtual absl::Status write_buffer_pieces(Buffer& buffer, uint64_t offset,
                                           std::span<const std::span<const std::byte>> pieces);
  // Waits for `event` (and all before it); reports a failed command.
  virtual absl::Status wait(EventId event) = 0;
  // enqueue_kernel, then wait for that launch, for a caller that keeps no
  // event (a worker running a launch on its own thread): the launch's
  // refusal or failure, else OK. The default calls both; a driver may do it
  // in fewer calls. Must not allocate in kad's code.
  virtual absl::Status run_kernel(CompiledKernel& kernel, const LaunchGeometry& geometry,
                                  const LaunchContext& context, std::span<const KernelArg> args);
  virtual absl::Status finish() = 0;
  // When launch `event`, which ended, started and ended on the device, as
  // the driver timed it; nothing where it does not (or no longer holds the
  // event). What the fair-share scheduler charges its tenant (DESIGN §8).
  // Must not allocate.
  virtual std::optional<DeviceTimes> device_times(EventId event) {
    (void)event;
    return std::nullopt;
  }
  // Whether launch `event` (and so every one before it) has ended without
  // error, as far as the driver tells without waiting; false where it
  // cannot tell. Must not allocate.
  virtual bool ended(EventId event) {
    (void)event;
    return false;
  }
  // Whether launch `event` (and so every one before it) is known to have
  // ended, with or without error, without waiting: what a tenant's quota
  // of launches in flight stops counting. ended() where the queue answers
  // it; a queue that leaves ended() unanswered for its scheduler's sake may
  // still know. Must not allocate.
  virtual bool known_ended(EventId event) { return ended(event); }
  // Has the driver call `callback->ended` once launch `event` has ended
  // (and so every one before it), from a thread of the driver's that it
  // must not block; at once, from this thread or that one, if it has ended
  // already. `callback` must stay valid until then. False where the driver
  // calls nothing back, or no longer holds the event: the caller waits.
  // Saves a thread that waits for each launch, and its wake-up. Must not
  // allocate in kad's code.
  virtual bool notify_ended(EventId event, EndCallback* callback) {
    (void)event;
    (void)callback;
    return false;
  }
};

// The escape hatch of DESIGN §3: a backend whose devices must launch in their
// own way (a vendor library's launcher, a fused path) takes over the whole
// launch. Documented, not the norm: the generic pipeline is used otherwise.
class LaunchOverride {
 public:
  virtual ~LaunchOverride() = default;
  virtual absl::StatusOr<LaunchResult> launch(Kernel& kernel, Queue& queue,
                                              const LaunchRequest& request) = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  virtual absl::StatusOr<std::unique_ptr<Buffer>> allocate(uint64_t bytes) = 0;
  // A buffer over host memory the caller owns and keeps mapped until the
  // buffer is destroyed and no command uses it. Host-visible devices only.
  virtual absl::StatusOr<std::unique_ptr<Buffer>> import_host_memory(const HostMemoryRef& host) {
    (void)host;
    return absl::UnimplementedError(info().id + " cannot use host memory as device memory");
  }
  virtual absl::StatusOr<std::unique_ptr<Queue>> create_queue() = 0;
  // Per-kernel compiler options this backend adds (for example a maximum
  // thread count equal to a static workgroup size). Part of the cache key.
  virtual std::string compiler_options(const KernelSignature& signature,
                                       const Specialization& spec) const {
    (void)signature;
    (void)spec;
    return {};
  }
  // Compiles; a failure carries the compiler's log.
  virtual absl::StatusOr<std::unique_ptr<CompiledKernel>> compile(
      const CompileRequest& request) = 0;
  // The part of compile() that needs no driver: lowering `request` to what
  // the driver takes, into the code cache (KernelLowering), in kad's own
  // confined tools. A daemon whose driver runs in a worker calls it before it
  // asks the worker to compile, and sends the worker the code it returns
  // (what compile() would look up in the code cache, under the same keys):
  // a worker reads no cache of kad's, which holds every tenant's code, and
  // plants code in none (DESIGN §8). Errors are the compile's own.
  virtual absl::StatusOr<std::vector<LoweredCode>> lower_ahead(const CompileRequest& request) {
    (void)request;
    return std::vector<LoweredCode>{};
  }
  // The driver's program binary of a kernel this device compiled: what
  // load_program_binary() takes in another process on the same machine, so
  // that a kernel is compiled once and loaded everywhere (DESIGN §8).
  // UNIMPLEMENTED where the driver keeps none; then every process compiles.
  virtual absl::StatusOr<std::string> program_binary(const CompiledKernel& kernel) const {
    (void)kernel;
    return absl::UnimplementedError(info().id + " keeps no program binaries");
  }
  // `request`'s kernel, from a program_binary() this device's driver made
  // for the same request; checked against the signature as compile() does.
  virtual absl::StatusOr<std::unique_ptr<CompiledKernel>> load_program_binary(
      const CompileRequest& request, absl::string_view binary) {
    (void)request;
    (void)binary;
    return absl::UnimplementedError(info().id + " keeps no program binaries");
  }
  virtual LaunchOverride* launch_override() { return nullptr; }
};

// What one backend found when kad started: its devices, and one log line per
// library or device — what was found, or why nothing was (library missing, no
// device). A backend that finds nothing never stops kad.
struct BackendDiscovery {
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<std::string> log;
};

// Checks that [offset, offset + size) lies inside `buffer`.
absl::Status check_buffer_range(const Buffer& buffer, uint64_t offset, uint64_t size);

// What every Queue::wait checks first: `id` was issued by a queue whose next
// event id is `next`.
absl::Status check_issued(EventId id, EventId next);

// For a queue that keeps the events of its last `ring` launches in a ring
// indexed by id: the id whose event to wait for so that `id` is complete —
// `id` itself, or, once its slot was reused, the oldest event still held,
// which completes after it (the queue is in order).
inline EventId oldest_held_event(EventId id, EventId next, uint64_t ring) {
  return next > ring && id < next - ring ? next - ring : id;
}

// What every Device::allocate checks first: a size of at least one byte and
// at most the device's largest allocation.
absl::Status check_allocation(const DeviceInfo& device, uint64_t bytes);

// What every Queue::write_buffer / read_buffer checks first: the buffer is on
// the queue's device and the range lies inside it.
absl::Status check_transfer(const Queue& queue, const Buffer& buffer, uint64_t offset,
                            uint64_t size);

// The bytes of write_buffer_pieces' pieces together, and a copy of them one
// after the other to `to`: for a queue whose buffers the host writes.
uint64_t size_of_pieces(std::span<const std::span<const std::byte>> pieces);
void copy_pieces(std::byte* to, std::span<const std::span<const std::byte>> pieces);

}  // namespace kad
