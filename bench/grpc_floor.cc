#include "bench/grpc_floor.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "kad/v1/kad.grpc.pb.h"

namespace kad_bench {
namespace {

// kad's largest message, as its daemon and client set it.
constexpr int kMaxMessage = (4 << 20) + (64 << 10);

class EchoService final : public kad::v1::Kad::Service {
  grpc::Status Submit(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<kad::v1::QueueReply, kad::v1::QueueCommand>* stream) override {
    kad::v1::QueueCommand command;
    kad::v1::QueueReply reply;
    while (stream->Read(&command)) {
      reply.set_tag(command.tag());
      if (!stream->Write(reply)) break;
    }
    return grpc::Status::OK;
  }
};

struct EchoServer {
  EchoService service;
  std::unique_ptr<grpc::Server> server;
  std::string unix_target, tcp_target;

  EchoServer() {
    const std::string path = absl::StrCat("/tmp/kad-bench-grpc-floor-", getpid(), ".sock");
    unlink(path.c_str());
    // The server lives as long as the process; its socket file goes with it.
    static std::string socket_file;
    socket_file = path;
    std::atexit([] { unlink(socket_file.c_str()); });
    grpc::ServerBuilder builder;
    builder.SetMaxReceiveMessageSize(kMaxMessage);
    builder.SetMaxSendMessageSize(kMaxMessage);
    int port = 0;
    builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    unix_target = "unix:" + path;
    tcp_target = absl::StrCat("127.0.0.1:", port);
  }
};

}  // namespace

std::string grpc_floor_target(const std::string& transport) {
  static EchoServer* echo = new EchoServer();  // lives as long as the process
  return transport == "unix" ? echo->unix_target : echo->tcp_target;
}

struct GrpcFloorClient::State {
  std::unique_ptr<kad::v1::Kad::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<kad::v1::QueueCommand, kad::v1::QueueReply>> stream;
  kad::v1::QueueCommand command;
  kad::v1::QueueReply reply;
  uint64_t tag = 0;
};

GrpcFloorClient::GrpcFloorClient(const std::string& transport) : state_(new State) {
  grpc::ChannelArguments args;  // as kad's client library sets them
  args.SetMaxReceiveMessageSize(kMaxMessage);
  args.SetMaxSendMessageSize(kMaxMessage);
  state_->stub = kad::v1::Kad::NewStub(grpc::CreateCustomChannel(
      grpc_floor_target(transport), grpc::InsecureChannelCredentials(), args));
  state_->stream = state_->stub->Submit(&state_->context);
  state_->command.mutable_ping();
}

GrpcFloorClient::~GrpcFloorClient() {
  state_->stream->WritesDone();
  state_->stream->Finish().ok();
  delete state_;
}

absl::Status GrpcFloorClient::roundtrip() {
  state_->command.set_tag(++state_->tag);
  if (!state_->stream->Write(state_->command) || !state_->stream->Read(&state_->reply) ||
      state_->reply.tag() != state_->tag)
    return absl::UnavailableError("the echo stream broke");
  return absl::OkStatus();
}

}  // namespace kad_bench
