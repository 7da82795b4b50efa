// Requests kad answered, by method and status code, for --metrics: counted
// by a gRPC server interceptor (installed only when metrics are asked for,
// so a daemon without them pays nothing), and the commands of Submit
// streams and shared-memory channels, by code, where each answer is made.
// Methods are the service's own; a name a client made up counts as
// "unknown", so no label carries what a client chose.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kad::server {

class RequestCounters {
 public:
  static constexpr int kCodes = 17;  // gRPC's status codes, OK to UNAUTHENTICATED

  RequestCounters();
  // The interceptor factory that counts every RPC's final status here.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> interceptor_factory();

  void count_request(int method, int code);
  void count_command(absl::StatusCode code);

  // Bytes that buffer copies moved (writes to and reads from a device's
  // buffers), by the transport that carried them; zero-copy buffers move none.
  enum class Transport { kGrpc, kSharedMemory };
  void count_copied(Transport via, bool to_device, uint64_t bytes) {
    copied_[static_cast<int>(via) * 2 + (to_device ? 0 : 1)].fetch_add(bytes,
                                                                       std::memory_order_relaxed);
  }
  uint64_t copied(Transport via, bool to_device) const {
    return copied_[static_cast<int>(via) * 2 + (to_device ? 0 : 1)].load(std::memory_order_relaxed);
  }

  // The methods counted ("kad.v1.Kad/Submit", ..., "unknown"), in index order.
  const std::vector<std::string>& methods() const { return methods_; }
  int method_index(const char* full_name) const;  // "/kad.v1.Kad/Submit"
  uint64_t requests(int method, int code) const {
    return requests_[method * kCodes + code].load(std::memory_order_relaxed);
  }
  uint64_t commands(int code) const { return commands_[code].load(std::memory_order_relaxed); }

 private:
  std::vector<std::string> methods_;
  std::unique_ptr<std::atomic<uint64_t>[]> requests_;
  std::array<std::atomic<uint64_t>, kCodes> commands_{};
  std::array<std::atomic<uint64_t>, 4> copied_{};
};

}  // namespace kad::server
