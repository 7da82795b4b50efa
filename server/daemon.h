// The kad daemon assembled once — engine, kad.v1 service (with
// grpc.health.v1) on every listen address, shared-memory listeners beside
// the UNIX sockets — for `kad` itself, the `inproc:` transport and the tests
// and benchmarks that run a daemon inside their own process.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/registry.h"
#include "server/engine.h"
#include "server/kad_service.h"
#include "server/listen_address.h"
#include "server/metrics_server.h"
#include "server/shm_listener.h"
#include "server/unix_acceptor.h"

namespace kad::server {

struct DaemonOptions {
  // unix:PATH or tcp://HOST:PORT (port 0 picks a free one). None: the
  // daemon serves only its in-process channel.
  std::vector<std::string> listen;
  uint64_t max_message_bytes = (4 << 20) + (64 << 10);  // a 1 MiB chunk fits with room
  EngineLimits limits;
  std::string tls_cert, tls_key;  // PEM files: TCP with TLS
  // PEM CA file: TCP clients must present a certificate it signed (mutual TLS).
  std::string tls_client_ca;
  bool allow_insecure_tcp = false;  // plaintext TCP beyond loopback
  bool shared_memory = true;        // shared-memory channels beside UNIX sockets
  // Who may connect to the UNIX sockets (DESIGN §8): their mode, and their
  // group by name ("": `kad` if that group exists, else the daemon's own).
  uint32_t socket_mode = 0660;
  std::string socket_group;
  // Bearer tokens every TCP client must present (server/bearer_tokens.h);
  // empty: none asked for.
  std::string tokens_file;
  ShmOptions shm;
  // tcp://HOST:PORT: Prometheus metrics on http://HOST:PORT/metrics
  // (server/metrics_server.h); "": none, and no request is counted.
  std::string metrics;
  // HTTP/2 keepalive on every connection: kad pings a connection idle this
  // long and closes it when no answer comes within the timeout, so that a
  // client that vanished without closing (a host down, a network cut, a
  // stopped process) has its sessions reclaimed within their sum.
  absl::Duration keepalive_time = absl::Seconds(30);
  absl::Duration keepalive_timeout = absl::Seconds(10);
  // Worker processes for client kernels (DESIGN §8); none when its command's
  // executable is empty (a daemon inside a test or client program).
  worker::WorkerOptions workers;
  // How Submit streams are served (kad_service.h).
  SubmitStreams submit_streams = SubmitStreams::kThreads;
};

class Daemon {
 public:
  // Serves `registry`'s devices on `options.listen`. INVALID_ARGUMENT for an
  // address or a plaintext TCP address kad refuses, FAILED_PRECONDITION for
  // a path that is not a socket, UNAVAILABLE when it cannot listen.
  static absl::StatusOr<std::unique_ptr<Daemon>> start(DeviceRegistry registry,
                                                       DaemonOptions options);
  ~Daemon();

  Engine& engine() { return engine_; }
  // Every address served, TCP ports resolved ("tcp://127.0.0.1:40123").
  const std::vector<std::string>& uris() const { return uris_; }
  // Where --metrics serves (http://HOST:PORT/metrics); "" without it.
  std::string metrics_url() const { return metrics_ ? metrics_->url() : std::string(); }
  // Shared-memory listeners started, one per UNIX socket (`<path>.shm`).
  const std::vector<std::unique_ptr<ShmListener>>& shm_listeners() const { return shm_; }
  // A channel to the service within this process (the `inproc:` transport).
  std::shared_ptr<grpc::Channel> in_process_channel();

  // SIGTERM's first half: health turns NOT_SERVING, new launches are refused
  // and queued ones finish, at most `timeout` (false when launches still run).
  bool drain(absl::Duration timeout);
  // Stops serving: replies in flight get `grace`, then streams are cancelled;
  // the shared-memory listeners end and the socket files go.
  void shutdown(absl::Duration grace);
  // The socket files only, for an exit that cannot wait for a clean shutdown.
  void remove_socket_files();
  // Reads --tokens again (SIGHUP); on an error the tokens in force stay.
  absl::Status reload_tokens();

 private:
  Daemon(DeviceRegistry registry, const DaemonOptions& options,
         std::unique_ptr<Authenticator> authenticator)
      : authenticator_(std::move(authenticator)),
        engine_(std::move(registry), options.limits, options.workers),
        service_(engine_, *authenticator_, options.submit_streams) {}

  std::unique_ptr<Authenticator> authenticator_;
  Engine engine_;
  KadService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsServer> metrics_;
  PeerCredentials peers_;  // of the connections the acceptors took
  std::vector<std::unique_ptr<UnixAcceptor>> acceptors_;
  std::vector<std::string> uris_;
  std::vector<std::string> socket_files_;
  std::vector<std::unique_ptr<ShmListener>> shm_;
  bool shut_down_ = false;
};

}  // namespace kad::server
