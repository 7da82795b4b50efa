// Client::check_health: grpc.health.v1's Check through gRPC's generic
// stub. The two messages are a handful of bytes (an empty request; a
// response whose field 1 is the serving status), written and read here, so
// that the installed library carries no grpc.health.v1 descriptors to clash
// with a program's own.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include "absl/strings/str_format.h"
#include "client/src/connection.h"
#include "kad/client.h"

namespace kad {

absl::Status Client::check_health(absl::string_view uri, const client::ConnectOptions& options,
                                  absl::Duration timeout) {
  absl::StatusOr<std::shared_ptr<client::Connection>> connection =
      client::open_connection(uri, options);
  if (!connection.ok()) return connection.status();
  grpc::GenericStub stub((*connection)->channel);
  grpc::ClientContext context;
  (*connection)->attach(context);
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::CompletionQueue queue;
  grpc::Slice empty;
  const grpc::ByteBuffer request(&empty, 1);  // HealthCheckRequest{service: ""}: kad as a whole
  auto call = stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", request, &queue);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, nullptr);
  void* tag = nullptr;
  bool ok = false;
  queue.Next(&tag, &ok);
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrFormat("kad at %s cannot be asked whether it serves: %s",
                                                  uri, status.error_message()));
  }
  // HealthCheckResponse: field 1, a varint: 1 SERVING, 2 NOT_SERVING.
  grpc::ProtoBufferReader reader(&response);
  google::protobuf::io::CodedInputStream in(&reader);
  uint32_t serving = 0;
  while (const uint32_t field = in.ReadTag()) {
    if (field == (1 << 3)) {
      if (!in.ReadVarint32(&serving)) break;
    } else if (!google::protobuf::internal::WireFormatLite::SkipField(&in, field)) {
      break;
    }
  }
  if (serving == 1) return absl::OkStatus();
  static constexpr const char* kStates[] = {"UNKNOWN", "SERVING", "NOT_SERVING (draining)",
                                            "SERVICE_UNKNOWN"};
  return absl::UnavailableError(absl::StrFormat(
      "kad at %s is %s", uri, serving < 4 ? kStates[serving] : "in no known state"));
}

}  // namespace kad
