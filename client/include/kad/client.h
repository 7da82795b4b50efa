// libkad_client: the thin C++ client of the kad device launch service.
//
//   auto client = kad::Client::connect("unix:/run/kad/kad.sock").value();
//   auto queue = client->create_queue().value();
//   auto x = client->allocate(n * sizeof(float)).value();
//   queue->write(x, 0, std::as_bytes(std::span(host)));
//   auto module = client->load_module(source).value();
//   auto kernel = client->get_kernel(module, {.entry = "scale",
//       .args = {kad::client::ArgSpec::buffer(),
//       kad::client::ArgSpec::scalar(kad::client::ScalarType::kF32)}}).value();
//   const kad::client::Arg args[] = {kad::client::Arg::buffer(x), kad::client::Arg::scalar(2.0f)};
//   auto launched = queue->launch(kernel, kad::client::Dims{n}, nullptr, args).value();
//   queue->wait(launched.event);
//
// URIs: unix:PATH, tcp://HOST:PORT, and inproc: (the engine in this process;
// link kad::inproc). Errors are absl::Status values carrying the daemon's
// message. Depends on gRPC and protobuf only.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kad {

class Client;

namespace client {

inline constexpr int kMaxRank = 8;

// Sizes per dimension, dimension 0 first (it varies fastest).
struct Dims {
  int rank = 0;
  std::array<int64_t, kMaxRank> v{};
  Dims() = default;
  Dims(std::initializer_list<int64_t> values) {
    for (int64_t x : values)
      if (rank < kMaxRank) v[static_cast<size_t>(rank++)] = x;
  }
  int64_t operator[](int d) const { return v[static_cast<size_t>(d)]; }
  bool operator==(const Dims&) const = default;
};

enum class ArgKind { kBuffer, kConstBuffer, kScalar, kLocal };
// What a module's bytes are (kad.v1's ModuleFormat). IR modules are built
// against the installed prelude's linked form (include/kad/kad_prelude.cl).
enum class ModuleFormat { kOpenClC, kSpirv, kLlvmBitcodeSpir64, kPtx, kCubin, kAmdgcnCodeObject };
enum class ScalarType { kI8, kU8, kI16, kU16, kI32, kU32, kI64, kU64, kF16, kF32, kF64 };

struct ArgSpec {
  ArgKind kind = ArgKind::kBuffer;
  ScalarType scalar = ScalarType::kI32;  // for kScalar
  static ArgSpec buffer() { return {ArgKind::kBuffer}; }
  static ArgSpec const_buffer() { return {ArgKind::kConstBuffer}; }
  static ArgSpec scalar_of(ScalarType t) { return {ArgKind::kScalar, t}; }
  static ArgSpec local() { return {ArgKind::kLocal}; }
};

// What a kernel fixes at compile time, and its arguments' kinds.
struct KernelSpec {
  std::string entry{};
  std::optional<Dims> static_ndrange{};
  std::optional<Dims> static_offsets{};  // with static_ndrange
  std::optional<Dims> static_workgroup{};
  std::vector<ArgSpec> args{};
  std::string build_options{};
};

struct Buffer {
  uint64_t handle = 0;
  uint64_t size = 0;
  // The buffer's memory is mapped into this process (zero-copy: a local
  // client and a host-visible device such as PoCL). Client::map gives it.
  bool mapped = false;
};
struct Module {
  uint64_t handle = 0;
  std::string digest;  // SHA-256 of the format and code
};
struct Kernel {
  uint64_t handle = 0;
};

// One launch argument, by value.
class Arg {
 public:
  static Arg buffer(const Buffer& b) { return Arg(Kind::kBuffer, b.handle, ScalarType::kI32); }
  static Arg local(uint64_t bytes) { return Arg(Kind::kLocal, bytes, ScalarType::kI32); }
  template <typename T>
  static Arg scalar(T value) {
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    return Arg(Kind::kScalar, bits, type_of<T>());
  }
  static Arg half_bits(uint16_t bits) { return Arg(Kind::kScalar, bits, ScalarType::kF16); }

  enum class Kind { kBuffer, kScalar, kLocal };
  Kind kind() const { return kind_; }
  uint64_t value() const { return value_; }  // handle, scalar bits or local bytes
  ScalarType scalar_type() const { return type_; }

 private:
  Arg(Kind k, uint64_t v, ScalarType t) : kind_(k), value_(v), type_(t) {}
  template <typename T>
  static constexpr ScalarType type_of() {
    if constexpr (std::is_same_v<T, int8_t>)
      return ScalarType::kI8;
    else if constexpr (std::is_same_v<T, uint8_t>)
      return ScalarType::kU8;
    else if constexpr (std::is_same_v<T, int16_t>)
      return ScalarType::kI16;
    else if constexpr (std::is_same_v<T, uint16_t>)
      return ScalarType::kU16;
    else if constexpr (std::is_same_v<T, int32_t>)
      return ScalarType::kI32;
    else if constexpr (std::is_same_v<T, uint32_t>)
      return ScalarType::kU32;
    else if constexpr (std::is_same_v<T, int64_t>)
      return ScalarType::kI64;
    else if constexpr (std::is_same_v<T, uint64_t>)
      return ScalarType::kU64;
    else if constexpr (std::is_same_v<T, float>)
      return ScalarType::kF32;
    else if constexpr (std::is_same_v<T, double>)
      return ScalarType::kF64;
    else
      static_assert(sizeof(T) == 0, "not a kernel scalar type");
  }
  Kind kind_;
  uint64_t value_;
  ScalarType type_;
};

struct DeviceInfo {
  std::string id, backend, name, vendor, platform, driver_version;
  bool is_cpu = false;
  bool is_default = false;
  uint64_t max_workgroup_size = 0;
  std::array<uint64_t, 3> max_workgroup_dims{};
  uint64_t compute_units = 0;
  uint64_t global_memory_bytes = 0;
  uint64_t max_allocation_bytes = 0;
  uint64_t local_memory_bytes = 0;
};

struct LaunchInfo {
  uint64_t event = 0;  // 0: complete at once (an empty ndrange)
  bool linear = false;
  int index_bits = 32;
  int rank = 0;
  Dims workgroup;  // as used (tuned or given)
};

struct ServiceStatus {
  uint64_t sessions = 0, sessions_opened = 0;
  // Busy while kad counted (waiting on their workers): not in the counts.
  uint64_t sessions_busy = 0;
  uint64_t buffers = 0, modules = 0, kernels = 0, queues = 0;
  uint64_t cache_entries = 0, cache_hits = 0, cache_compilations = 0;
  // Entries dropped, least recently used first, to stay within the bound.
  uint64_t cache_evictions = 0, cache_max_entries = 0;
  // Bytes of kad's memory its entries hold (program binaries), and its
  // bound on them (half of kad's --max-host-memory).
  uint64_t cache_bytes = 0, cache_max_bytes = 0;
  // Worker processes: running now, started in all, ended by a kernel's
  // crash, stopped at a deadline (a launch's or a compile's).
  uint64_t workers_running = 0, workers_started = 0, workers_crashed = 0, workers_timed_out = 0;
  // What confines workers: "files, TCP, ..., system calls"; what is missing
  // after "not:". Empty before kad started one.
  std::string workers_walls;
  // Compiles that failed, and launches answered with a remembered failure.
  uint64_t cache_failures = 0, cache_remembered_failures = 0;
  uint64_t launches = 0;
  uint64_t queue_depth = 0;  // launches submitted and not yet waited for
  // The direct path (kad --shm-direct): shared-memory channels lent to
  // their sessions' workers now, loans in all, and the launches the workers
  // served on them (counted in `launches` too).
  uint64_t channels_lent = 0, channel_loans = 0, lent_launches = 0;
  bool draining = false;
  struct Device {
    std::string id;
    uint64_t launches = 0, buffers = 0, buffer_bytes = 0, queues = 0;
    // kad's fair-share scheduler on it: its queue's depth (0: none), the
    // launches on it, those waiting in kad now, and all that ever waited.
    uint32_t queue_depth = 0;
    uint64_t in_flight = 0, held = 0, held_total = 0;
    // What launches share while queues compete: depth/16 on a device that
    // sessions share, 4 per compute unit where they run in workers.
    uint32_t contended_depth = 0;
  };
  std::vector<Device> devices;
  // The daemon's own host memory clients made it hold, and its bound.
  uint64_t host_memory_bytes = 0, host_memory_limit = 0;
  // Tenants (DESIGN §8) and their use of each quota: all of them for the
  // daemon's operator, else the caller's own.
  struct QuotaUse {
    std::string quota;   // "sessions", "device_memory_bytes", "queues", ...
    std::string device;  // device_memory_bytes: per device
    uint64_t used = 0, limit = 0;
  };
  struct Tenant {
    std::string name;
    uint32_t weight = 1;
    int32_t priority = 0;
    int cpu_nice = 0;  // the niceness its kernels run at on CPU devices
    std::vector<QuotaUse> quotas;
  };
  std::vector<Tenant> tenants;
};

class Connection;

// An in-order queue on one device: launches, waits and copies run in order.
// Over a local UNIX socket they travel through shared memory (fixed-size
// records in rings, no gRPC message per launch); otherwise over one gRPC
// stream per queue.
class Queue {
 public:
  ~Queue();
  uint64_t handle() const { return handle_; }
  // Whether this queue talks to kad through shared memory.
  bool shared_memory() const;

  // ndrange null: the kernel's static ndrange. workgroup null: static or tuned.
  absl::StatusOr<LaunchInfo> launch(const Kernel& kernel, const Dims* ndrange,
                                    const Dims* workgroup, std::span<const Arg> args,
                                    const Dims* offsets = nullptr);
  absl::StatusOr<LaunchInfo> launch(const Kernel& kernel, const Dims& ndrange,
                                    const Dims* workgroup, std::span<const Arg> args) {
    return launch(kernel, &ndrange, workgroup, args);
  }
  // Launches and waits until the launch (and everything submitted before it)
  // has completed, in one round trip to kad: a synchronous launch. Like
  // wait(), it also reports the first error of a launch submitted since the
  // last wait; the LaunchInfo is the launch's own.
  absl::StatusOr<LaunchInfo> run(const Kernel& kernel, const Dims* ndrange, const Dims* workgroup,
                                 std::span<const Arg> args, const Dims* offsets = nullptr);
  absl::StatusOr<LaunchInfo> run(const Kernel& kernel, const Dims& ndrange, const Dims* workgroup,
                                 std::span<const Arg> args) {
    return run(kernel, &ndrange, workgroup, args);
  }
  // Pipelined: sends the launch without waiting for the daemon's answer, so
  // that submission overlaps with the daemon's work. An error of a submitted
  // launch is returned by the next wait() or run(), naming the launch. Over
  // gRPC, launches submitted back to back travel together, up to
  // kBatchLaunches in one message: a batch leaves when it is full, when any
  // other call on the queue needs the stream (wait, run, launch, ping, a
  // copy) and at most kFlushAfter after its first launch; at most
  // kMaxInFlight batches' answers are left unread, past that submit reads
  // one first (back-pressure). Over shared memory a submitted launch is
  // answered only when it fails, and submit waits while kad's submission
  // ring is full.
  absl::Status submit(const Kernel& kernel, const Dims* ndrange, const Dims* workgroup,
                      std::span<const Arg> args, const Dims* offsets = nullptr);
  static constexpr int kMaxInFlight = 255;
  static constexpr int kBatchLaunches = 64;
  static constexpr absl::Duration kFlushAfter = absl::Microseconds(200);

  // Waits for `event` and everything submitted before it; 0 waits for all.
  // Also reports the first error of a submitted launch since the last wait.
  absl::Status wait(uint64_t event = 0);
  // A round trip through this queue's transport with no kad work: its floor.
  absl::Status ping();
  // Copies, ordered after everything already submitted to this queue. Large
  // transfers are split into chunks.
  absl::Status write(const Buffer& buffer, uint64_t offset, std::span<const std::byte> data);
  absl::Status read(const Buffer& buffer, uint64_t offset, std::span<std::byte> data);

  // The longest one launch may run before kad stops it (DEADLINE_EXCEEDED
  // at the next wait); zero where kad enforces none (kernels in its own
  // process: --no-workers, GPU devices).
  absl::Duration launch_timeout() const { return launch_timeout_; }

  class Transport;  // the gRPC stream or the shared-memory channel

 private:
  friend class ::kad::Client;
  Queue(std::shared_ptr<Connection> connection, uint64_t handle,
        std::unique_ptr<Transport> transport);
  std::shared_ptr<Connection> connection_;
  uint64_t handle_;
  std::unique_ptr<Transport> transport_;
  absl::Duration launch_timeout_;
};

}  // namespace client

namespace client {
// How to prove who the client is to a kad that asks (DESIGN §8).
struct ConnectOptions {
  // Bearer token for a kad whose TCP clients must present one (--tokens).
  // Empty: $KAD_TOKEN, else the first line of the file $KAD_TOKEN_FILE
  // names, else none. Sent on every call; never on a unix: or inproc: URI,
  // where the daemon knows its peer otherwise.
  std::string token;
  // tls://HOST:PORT (DESIGN §8): the CA that signed kad's certificate (PEM
  // file; empty: $KAD_TLS_CA, else the system's roots), and for a kad that
  // asks for client certificates (mutual TLS) this client's certificate and
  // key (PEM files; empty: $KAD_TLS_CERT, $KAD_TLS_KEY).
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // HTTP/2 keepalive on the connection to kad: a ping after this long idle,
  // and the connection closed (calls UNAVAILABLE) when no answer comes within
  // the timeout, so that a vanished kad is noticed while this client waits.
  // A connection that broke stays broken: its session is gone with it, and a
  // new Client::connect opens a new connection and session.
  absl::Duration keepalive_time = absl::Seconds(30);
  absl::Duration keepalive_timeout = absl::Seconds(10);
};
}  // namespace client

class Client {
 public:
  // Connects and opens a session. `name` shows in the daemon's logs.
  static absl::StatusOr<std::unique_ptr<Client>> connect(absl::string_view uri,
                                                         absl::string_view name = "");
  static absl::StatusOr<std::unique_ptr<Client>> connect(absl::string_view uri,
                                                         absl::string_view name,
                                                         const client::ConnectOptions& options);
  // Whether kad at `uri` serves, asked through grpc.health.v1 without
  // opening a session (a probe's question): OK when SERVING; UNAVAILABLE
  // naming the state (NOT_SERVING while kad drains) or why kad could not be
  // asked within `timeout`.
  static absl::Status check_health(absl::string_view uri,
                                   const client::ConnectOptions& options = {},
                                   absl::Duration timeout = absl::Seconds(5));
  // Closes the session: the daemon reclaims everything it holds.
  ~Client();

  const std::string& session_id() const;

  absl::StatusOr<std::vector<client::DeviceInfo>> devices();
  absl::StatusOr<client::ServiceStatus> status();

  // device "": the daemon's default device.
  absl::StatusOr<client::Buffer> allocate(uint64_t bytes, absl::string_view device = "");
  // Refused (FAILED_PRECONDITION) for a mapped buffer while a launch may still
  // use it: wait first.
  absl::Status free(const client::Buffer& buffer);
  // The memory of a mapped buffer (Buffer::mapped), shared with the device.
  // Touch it only when no launch that uses the buffer is in flight (after a
  // wait); Queue::write and Queue::read on it wait, then copy directly.
  absl::StatusOr<std::span<std::byte>> map(const client::Buffer& buffer);
  absl::StatusOr<client::Module> load_module(absl::string_view opencl_c_source);
  // A module in any format; the daemon checks the bytes and lowers them for
  // the device that launches them (errors name the format and the fault).
  absl::StatusOr<client::Module> load_module(client::ModuleFormat format, absl::string_view bytes);
  absl::StatusOr<client::Kernel> get_kernel(const client::Module& module,
                                            const client::KernelSpec& spec);
  // `launch_timeout`: how long one launch may run before kad stops it; zero
  // takes the daemon's --launch-timeout, which also caps a longer one.
  absl::StatusOr<std::unique_ptr<client::Queue>> create_queue(
      absl::string_view device = "", absl::Duration launch_timeout = absl::ZeroDuration());

 private:
  explicit Client(std::shared_ptr<client::Connection> connection);
  std::shared_ptr<client::Connection> connection_;
};

}  // namespace kad
