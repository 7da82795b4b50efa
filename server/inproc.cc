// The `inproc:` transport: the engine runs inside the client's process, served
// through a gRPC in-process channel, so that the client API is the same one.
// Linking kad_inproc into a program makes `inproc:` available to kad::Client.
#include "kad/inproc.h"

#include <grpcpp/grpcpp.h>

#include <memory>

#include "backends/registry.h"
#include "server/daemon.h"

namespace kad::server {
namespace {

std::shared_ptr<grpc::Channel> inproc_channel() {
  // Listens nowhere: only its in-process channel. Lives as long as the process.
  static Daemon* daemon = [] {
    absl::StatusOr<std::unique_ptr<Daemon>> d = Daemon::start(discover_devices(), DaemonOptions{});
    return d.ok() ? d->release() : nullptr;
  }();
  if (daemon == nullptr) return nullptr;
  return daemon->in_process_channel();
}

// Registers at start; the engine itself starts on the first inproc: connect.
const bool registered = [] {
  client::register_inproc(inproc_channel);
  return true;
}();

}  // namespace
}  // namespace kad::server
