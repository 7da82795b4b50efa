// A kad daemon inside the current process — engine, gRPC service on a UNIX
// socket and loopback TCP, shared-memory listener — for tests and benchmarks
// that count allocations on both sides while clients reach it over real sockets.
#pragma once

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/registry.h"
#include "server/engine.h"
#include "server/kad_service.h"
#include "server/shm_listener.h"

namespace kad::testing {

class InProcessDaemon {
 public:
  explicit InProcessDaemon(const std::string& name)
      : engine_(discover_devices(), server::EngineLimits{}), service_(engine_) {
    socket_ = absl::StrFormat("/tmp/kad-%s-%d.sock", name, getpid());
    std::filesystem::remove(socket_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket_, grpc::InsecureServerCredentials());
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &tcp_port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    if (auto l = server::ShmListener::start(engine_, socket_ + ".shm", {}); l.ok())
      shm_ = *std::move(l);
  }
  ~InProcessDaemon() {
    shm_.reset();
    if (server_) server_->Shutdown();
    std::filesystem::remove(socket_);
  }

  bool serving() const { return server_ != nullptr && shm_ != nullptr; }
  // "shm", "grpc-unix" or "grpc-tcp".
  std::string uri(const std::string& mode) const {
    if (mode == "shm") return "unix:" + socket_ + "?transport=shm";
    if (mode == "grpc-unix") return "unix:" + socket_ + "?transport=grpc";
    return absl::StrCat("tcp://127.0.0.1:", tcp_port_);
  }
  server::ShmListener& shm() { return *shm_; }

 private:
  server::Engine engine_;
  server::KadService service_;
  std::string socket_;
  int tcp_port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<server::ShmListener> shm_;
};

}  // namespace kad::testing
