// The bench's latency mode (issue 13): a link with a known round trip, to
// count kad's round trips per operation (time / RTT). netem in a network
// namespace of its own (`unshare -n`, `tc qdisc add dev lo root netem delay
// 500us`) is the kernel's way to make one, but kernels without the sch_netem
// module cannot (this project's 2-core VM has none); this is the same link in
// user space, on any machine: a TCP proxy on 127.0.0.1 that holds every byte
// `one_way` before it forwards it, in each direction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kad_bench {

class DelayProxy {
 public:
  // Listens on a free loopback port and forwards each connection to
  // 127.0.0.1:`upstream_port`. It serves until the process exits.
  static absl::StatusOr<DelayProxy*> start(int upstream_port, absl::Duration one_way);
  int port() const { return port_; }

 private:
  DelayProxy() = default;
  int port_ = 0;
};

// A plain TCP echo server on a free loopback port (serves until exit): what a
// round trip costs with no RPC system, through the proxy or not.
absl::StatusOr<int> start_tcp_echo();

// A plain TCP sink on a free loopback port (serves until exit): on each
// connection, an 8-byte length, then that many bytes, answered by one byte.
// The floor of a transfer over TCP.
absl::StatusOr<int> start_tcp_sink();

// Seconds to send `bytes` of `data` (repeated) to the sink at `port` and hear
// it got them all, on one plain TCP connection.
absl::StatusOr<double> tcp_send_seconds(int port, const std::string& data, uint64_t bytes);

// The median of `n` one-byte ping-pongs on a plain TCP connection to
// 127.0.0.1:`port`.
absl::StatusOr<absl::Duration> tcp_round_trip(int port, int n);

}  // namespace kad_bench
