// kad.v1.Kad over gRPC: decodes requests, calls the Engine, encodes replies,
// and maps absl::Status codes to gRPC's at this edge.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <optional>
#include <string>

#include "kad/v1/kad.grpc.pb.h"
#include "server/bearer_tokens.h"
#include "server/command_pool.h"
#include "server/engine.h"

namespace kad::server {

// Metadata key naming the session of every call but OpenSession.
inline constexpr char kSessionMetadata[] = "kad-session";
// Largest payload of one copy message or transfer chunk.
inline constexpr uint64_t kMaxChunkBytes = 1 << 20;
// The most launches one LaunchBatch may carry.
inline constexpr size_t kMaxBatchLaunches = 1024;

grpc::Status to_grpc(const absl::Status& status);

// How Submit streams are served (--submit-streams). gRPC 1.51's callback
// API costs a round trip 25-40 µs more than its sync API on the 2-core
// development VM (bare echo servers, bench/results/2026-12-02-submit-reactor),
// most of what a synchronous launch over gRPC costs kad; its sync API holds
// a thread per open stream, which a service with many
// mostly idle remote clients pays for in threads.
enum class SubmitStreams {
  kThreads,   // the sync API: the lowest latency
  kReactors,  // reactors (submit_reactor.h): no thread while a stream waits for its client
};

// OpenSession uses the callback API: a session holds no server thread while
// it waits for its client to leave. WriteBuffer and ReadBuffer take and
// give gRPC's bytes (transfer_chunks.h): a transfer's data is not copied
// through protobuf messages.
class KadService final : public v1::Kad::WithCallbackMethod_OpenSession<v1::Kad::Service> {
 public:
  // Every call is first checked by `authenticator` (bearer tokens on TCP).
  KadService(Engine& engine, const Authenticator& authenticator,
             SubmitStreams submit_streams = SubmitStreams::kThreads);

  grpc::ServerWriteReactor<v1::SessionEvent>* OpenSession(
      grpc::CallbackServerContext* context, const v1::OpenSessionRequest* request) override;

  grpc::Status ListDevices(grpc::ServerContext*, const v1::ListDevicesRequest*,
                           v1::ListDevicesResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext*, const v1::GetStatusRequest*,
                         v1::GetStatusResponse* response) override;
  grpc::Status AllocateBuffer(grpc::ServerContext* context,
                              const v1::AllocateBufferRequest* request,
                              v1::AllocateBufferResponse* response) override;
  grpc::Status FreeBuffer(grpc::ServerContext* context, const v1::FreeBufferRequest* request,
                          v1::FreeBufferResponse* response) override;
  // WriteBuffer: WriteBufferChunks in, one WriteBufferResponse out.
  grpc::Status WriteBufferBytes(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::WriteBufferResponse, grpc::ByteBuffer>* stream);
  // ReadBuffer: one ReadBufferRequest in, BufferChunks out.
  grpc::Status ReadBufferBytes(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream);
  grpc::Status LoadModule(grpc::ServerContext* context, const v1::LoadModuleRequest* request,
                          v1::LoadModuleResponse* response) override;
  grpc::Status GetKernel(grpc::ServerContext* context, const v1::GetKernelRequest* request,
                         v1::GetKernelResponse* response) override;
  grpc::Status CreateQueue(grpc::ServerContext* context, const v1::CreateQueueRequest* request,
                           v1::CreateQueueResponse* response) override;
  // A stream of queue commands on a thread of gRPC's sync server, which
  // reads them, runs each and writes its reply (SubmitStreams::kThreads).
  grpc::Status Submit(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<v1::QueueReply, v1::QueueCommand>* stream) override;
  // The same as a reactor on gRPC's callback threads, its commands run on
  // commands_ (SubmitStreams::kReactors).
  grpc::ServerBidiReactor<v1::QueueCommand, v1::QueueReply>* submit_reactor(
      grpc::CallbackServerContext* context);

  // Readies a reused reply for the next command without freeing what it
  // holds: Clear() would delete the `choice` submessage, and the next launch
  // would allocate it again (DESIGN §7). A reply that is no launch's may so
  // carry an empty `choice`.
  static void reset_reply(v1::QueueReply* reply);

  // Tells the service the uid of a UNIX socket peer (SO_PEERCRED, taken as
  // kad accepts), by gRPC's peer string. Called before it serves.
  void set_peer_uid(std::function<std::optional<uint32_t>(const std::string& peer)> lookup) {
    peer_uid_ = std::move(lookup);
  }

  // Runs one queue command; the reply carries its status. What Submit runs
  // for every command it reads; public so that the allocation tests drive
  // this very dispatch (tests/alloc/daemon_alloc_test.cc).
  void run_command(Session& session, uint64_t queue, const v1::QueueCommand& command,
                   v1::QueueReply* reply);
  // Runs one command of a Submit stream bound to `queue` (0: bound by this
  // command): the reply carries its tag, and a command naming another queue
  // is refused.
  void run_stream_command(Session& session, uint64_t& queue, const v1::QueueCommand& command,
                          v1::QueueReply* reply);
  // Launches submitted back to back in one message; one reply for all.
  void run_batch(Session& session, uint64_t queue, const v1::LaunchBatch& batch,
                 v1::QueueReply* reply);

 private:
  absl::StatusOr<std::shared_ptr<Session>> session_of(const grpc::ServerContextBase& context);
  // OK when the call may be served (its token, where tokens are asked for):
  // what every call checks first, cheaply.
  absl::Status authenticate(const grpc::ServerContextBase& context) const;
  // The tenant the call's bearer token names ("" where none is asked for).
  absl::StatusOr<std::string> token_tenant(const grpc::ServerContextBase& context) const;
  // Who the call comes from (tenants.h), once authenticated: for OpenSession
  // and GetStatus, which need it.
  absl::StatusOr<CallerIdentity> identify(const grpc::ServerContextBase& context) const;
  // A Submit stream's place among the session's (--max-streams-per-session).
  absl::StatusOr<SessionSlot> stream_slot(Session& session);
  // A transfer's slot (--max-transfers-per-session): a WriteBuffer or
  // ReadBuffer call holds a thread while its client keeps it open.
  absl::StatusOr<SessionSlot> transfer_slot(Session& session);

  Engine& engine_;
  const Authenticator& authenticator_;
  // Runs reactor streams' commands; stops after gRPC's server (whose
  // streams use it) is gone. Null with SubmitStreams::kThreads.
  std::unique_ptr<CommandPool> commands_;
  // The uid of a UNIX socket peer, by gRPC's peer string; set before serving.
  std::function<std::optional<uint32_t>(const std::string& peer)> peer_uid_;
};

}  // namespace kad::server
