// kad's client side of a benchmark (shm/, grpc-unix/, grpc-tcp/): a Runner
// over libkad_client alone, so that a client process that only links the
// client library (kad_bench_client) runs exactly what kad_bench's client modes run.
#pragma once

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "bench/runner.h"
#include "kad/client.h"

namespace kad_bench {

// KAD_BENCH_DEVICE, or "" for the registry's default device. Read without
// discovering devices, so that client worker processes (whose start-up some
// benchmarks time) do not pay for a discovery they never use.
inline std::string requested_device_id() {
  const char* id = std::getenv("KAD_BENCH_DEVICE");
  return id == nullptr ? std::string() : std::string(absl::StripAsciiWhitespace(id));
}

// time_to_load times a process until it has its first launch's result, not
// until it exits: a kad client's exit (closing its session, gRPC's own
// shutdown) is not part of its first launch. The bench names a file in this
// variable; the process writes there the moment it has that result, on the
// steady clock (CLOCK_MONOTONIC, the same in every process).
inline constexpr char kFirstLaunchFileVariable[] = "KAD_BENCH_FIRST_LAUNCH_FILE";
inline void note_first_launch() {
  if (const char* path = std::getenv(kFirstLaunchFileVariable))
    std::ofstream(path) << std::chrono::steady_clock::now().time_since_epoch().count();
}

// The kernel a new client's first launch runs (time_to_load).
inline Work first_launch_work() { return Work{"scale", "float", {{64}, {}, false, false, false}}; }

class ClientRunner final : public Runner {
 public:
  // `uri`: the daemon's address, with the transport (`unix:...?transport=shm`).
  explicit ClientRunner(std::string uri) : uri_(std::move(uri)) {}
  absl::Status setup(const Work& w) override {
    auto c = kad::Client::connect(uri_, "bench");
    if (!c.ok()) return c.status();
    client_ = *std::move(c);
    // KAD_BENCH_DEVICE's device ("": the daemon's default, which is the
    // registry's default device as in inproc/).
    const std::string device = requested_device_id();
    auto q = client_->create_queue(device);
    if (!q.ok()) return q.status();
    queue_ = *std::move(q);
    auto m = client_->load_module(w.source(false));
    if (!m.ok()) return m.status();
    const auto t =
        w.double_scalar() ? kad::client::ScalarType::kF64 : kad::client::ScalarType::kF32;
    kad::client::KernelSpec spec{.entry = w.kernel};
    for (char c : w.layout()) {
      spec.args.push_back(c == 'B'   ? kad::client::ArgSpec::buffer()
                          : c == 'C' ? kad::client::ArgSpec::const_buffer()
                                     : kad::client::ArgSpec::scalar_of(t));
    }
    for (int64_t e : w.shape.ndrange) range_.v[range_.rank++] = e;
    for (int64_t e : w.shape.workgroup) workgroup_.v[workgroup_.rank++] = e;
    if (w.shape.static_ndrange) spec.static_ndrange = range_;
    if (w.shape.static_workgroup) spec.static_workgroup = workgroup_;
    auto k = client_->get_kernel(*m, spec);
    if (!k.ok()) return k.status();
    kernel_ = *k;
    for (char c : w.layout()) {
      if (c == 'S') {
        args_.push_back(t == kad::client::ScalarType::kF64 ? kad::client::Arg::scalar(2.0)
                                                           : kad::client::Arg::scalar(2.0f));
        continue;
      }
      auto b = client_->allocate(static_cast<uint64_t>(w.items()) * w.element_bytes(), device);
      if (!b.ok()) return b.status();
      args_.push_back(kad::client::Arg::buffer(*b));
    }
    static_ndrange_ = w.shape.static_ndrange;
    give_workgroup_ = w.shape.give_workgroup;
    return absl::OkStatus();
  }
  absl::Status launch() override {
    return queue_->submit(kernel_, static_ndrange_ ? nullptr : &range_,
                          give_workgroup_ ? &workgroup_ : nullptr, args_);
  }
  absl::Status wait() override { return queue_->wait(); }
  absl::Status run() override {
    return queue_
        ->run(kernel_, static_ndrange_ ? nullptr : &range_, give_workgroup_ ? &workgroup_ : nullptr,
              args_)
        .status();
  }
  absl::Status ping() override { return queue_->ping(); }

 private:
  std::string uri_;
  std::unique_ptr<kad::Client> client_;
  std::unique_ptr<kad::client::Queue> queue_;
  kad::client::Kernel kernel_;
  std::vector<kad::client::Arg> args_;
  kad::client::Dims range_, workgroup_;
  bool static_ndrange_ = false, give_workgroup_ = false;
};

}  // namespace kad_bench
