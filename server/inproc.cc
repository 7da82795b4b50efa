// The `inproc:` transport: the engine runs inside the client's process, served
// through a gRPC in-process channel, so that the client API is the same one.
// Linking kad_inproc into a program makes `inproc:` available to kad::Client.
#include "kad/inproc.h"

#include <grpcpp/grpcpp.h>

#include <memory>

#include "backends/registry.h"
#include "server/engine.h"
#include "server/kad_service.h"

namespace kad::server {
namespace {

std::shared_ptr<grpc::Channel> inproc_channel() {
  struct InProcess {
    InProcess() : engine(discover_devices(), server::EngineLimits{}), service(engine) {
      grpc::ServerBuilder builder;
      builder.SetMaxReceiveMessageSize((4 << 20) + (64 << 10));
      builder.RegisterService(&service);
      grpc_server = builder.BuildAndStart();
    }
    server::Engine engine;
    server::KadService service;
    std::unique_ptr<grpc::Server> grpc_server;
  };
  static InProcess* in_process = new InProcess();  // lives as long as the process
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize((4 << 20) + (64 << 10));
  return in_process->grpc_server->InProcessChannel(args);
}

// Registers at start; the engine itself starts on the first inproc: connect.
const bool registered = [] {
  client::register_inproc(inproc_channel);
  return true;
}();

}  // namespace
}  // namespace kad::server
