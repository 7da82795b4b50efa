// grpc-floor-unix/, grpc-floor-tcp/: a bare gRPC bidirectional-stream echo,
// the floor that kad's Queue::ping over gRPC is measured against (DESIGN §9:
// within 1.15×). The same service definition, messages and message-size
// settings as kad's Submit stream; the server answers each command from the
// thread that read it, with no kad code on either side.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace kad_bench {

// The echo server, started once per process: "unix" or "tcp" gives its URI
// (unix:PATH, or 127.0.0.1:PORT as gRPC names it).
std::string grpc_floor_target(const std::string& transport);

// A client of the echo server: one Submit stream, one command and one reply
// per round trip.
class GrpcFloorClient {
 public:
  explicit GrpcFloorClient(const std::string& transport);
  ~GrpcFloorClient();
  absl::Status roundtrip();

 private:
  struct State;
  State* state_;
};

}  // namespace kad_bench
