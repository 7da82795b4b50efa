// Internals of libkad_client shared by its files: the connection (channel,
// stub, session) and the queue transports.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kad/client.h"
#include "kad/v1/kad.grpc.pb.h"

namespace kad::client {

inline constexpr uint64_t kChunk = 1 << 20;  // the daemon's largest copy or chunk

absl::Status from_grpc(const grpc::Status& s);
void to_wire(const Dims& d, google::protobuf::RepeatedField<int64_t>* out);
v1::ScalarType to_wire(ScalarType t);

enum class TransportChoice { kAuto, kGrpc, kShm };

class Connection {
 public:
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Kad::Stub> stub;
  std::string session_id;
  std::string authorization;  // "Bearer TOKEN" on TCP when the client has a token
  bool tls = false;           // a tls:// URI
  std::string unix_path;  // set for unix: URIs: the shared-memory side socket is unix_path + ".shm"
  TransportChoice transport = TransportChoice::kAuto;
  grpc::ClientContext session_context;  // the open OpenSession stream

  // Opens the session (OpenSession), its id in session_id: the status of
  // kad's answer. The stream is then read asynchronously, one Read always
  // pending, so that session_lost() can look without waiting.
  grpc::Status open_session(const v1::OpenSessionRequest& request);
  // Whether kad has ended this connection's session (its stream closed: kad
  // stopped, restarted, or dropped it). Waits at most `grace` for news.
  bool session_lost(absl::Duration grace = absl::ZeroDuration()) const;

  // Every call carries the session (once open) and the token (if any).
  void attach(grpc::ClientContext& context) const {
    if (!session_id.empty()) context.AddMetadata("kad-session", session_id);
    if (!authorization.empty()) context.AddMetadata("authorization", authorization);
  }

  // A call's status. A call that fails as UNAVAILABLE while the session's
  // stream has ended, or that a kad which no longer knows the session
  // answers (one that restarted, or reclaimed it), found the session gone
  // for good: that is said as UNAVAILABLE, naming the session and what to
  // do, whichever call found it. kad's own UNAVAILABLE answers (draining, a
  // worker that cannot start) keep their words.
  absl::Status status_of(const grpc::Status& s) const;
  // The message of a session found gone, with the `cause` seen.
  std::string session_gone(std::string_view cause) const;

  // Zero-copy buffers mapped into this process, by handle.
  struct Mapping {
    std::byte* data = nullptr;
    uint64_t bytes = 0;
  };
  absl::Mutex mappings_mu;
  absl::flat_hash_map<uint64_t, Mapping> mappings ABSL_GUARDED_BY(mappings_mu);
  // The mapping of `handle`, or {} when it is not mapped. Allocates nothing.
  Mapping mapping(uint64_t handle) {
    absl::MutexLock lock(&mappings_mu);
    auto it = mappings.find(handle);
    return it == mappings.end() ? Mapping{} : it->second;
  }

  ~Connection();

 private:
  mutable absl::Mutex session_mu_;
  mutable grpc::CompletionQueue session_queue_;
  std::unique_ptr<grpc::ClientAsyncReader<v1::SessionEvent>> session_stream_;
  mutable v1::SessionEvent session_event_;  // the pending Read's
  mutable bool read_pending_ ABSL_GUARDED_BY(session_mu_) = false;
  mutable bool lost_ ABSL_GUARDED_BY(session_mu_) = false;
};

class Queue::Transport {
 public:
  virtual ~Transport() = default;
  virtual bool shared_memory() const = 0;
  virtual absl::StatusOr<LaunchInfo> launch(const Kernel& kernel, const Dims* ndrange,
                                            const Dims* workgroup, std::span<const Arg> args,
                                            const Dims* offsets) = 0;
  virtual absl::StatusOr<LaunchInfo> run(const Kernel& kernel, const Dims* ndrange,
                                         const Dims* workgroup, std::span<const Arg> args,
                                         const Dims* offsets) = 0;
  virtual absl::Status submit(const Kernel& kernel, const Dims* ndrange, const Dims* workgroup,
                              std::span<const Arg> args, const Dims* offsets) = 0;
  virtual absl::Status wait(uint64_t event) = 0;
  virtual absl::Status ping() = 0;
  virtual absl::Status write(const Buffer& buffer, uint64_t offset,
                             std::span<const std::byte> data) = 0;
  virtual absl::Status read(const Buffer& buffer, uint64_t offset, std::span<std::byte> data) = 0;

 protected:
  // Keeps the first failure of a submitted launch, reported by the next wait.
  void defer(absl::StatusCode code, absl::string_view message) {
    if (deferred_.ok())
      deferred_ = absl::Status(code, absl::StrCat("a submitted launch failed: ", message));
  }
  // What wait() returns: the deferred failure (once), else the wait's own status.
  absl::Status after_wait(absl::Status waited) {
    if (deferred_.ok()) return waited;
    absl::Status first = std::move(deferred_);
    deferred_ = absl::OkStatus();
    return first;
  }
  // What run() returns: the deferred failure (once), else the run's own result.
  absl::StatusOr<LaunchInfo> after_run(absl::StatusOr<LaunchInfo> ran) {
    if (deferred_.ok()) return ran;
    return after_wait(absl::OkStatus());
  }

 private:
  absl::Status deferred_;
};

std::unique_ptr<Queue::Transport> make_grpc_transport(std::shared_ptr<Connection> connection,
                                                      uint64_t queue);
// Opens the queue's shared-memory channel; fails when kad offers none.
absl::StatusOr<std::unique_ptr<Queue::Transport>> make_shm_transport(
    std::shared_ptr<Connection> connection, uint64_t queue);

// Maps a zero-copy buffer through the shared-memory side socket.
absl::StatusOr<Connection::Mapping> map_shared_buffer(const Connection& connection,
                                                      uint64_t buffer);

// Streams a large write or read through WriteBuffer / ReadBuffer.
// The channel to kad at `uri` (unix:, tcp://, tls://, inproc:, with
// ?transport=), the token to send set, no session opened yet.
absl::StatusOr<std::shared_ptr<Connection>> open_connection(absl::string_view uri,
                                                            const ConnectOptions& options);

absl::Status write_streamed(Connection& connection, uint64_t queue, const Buffer& buffer,
                            uint64_t offset, std::span<const std::byte> data);
absl::Status read_streamed(Connection& connection, uint64_t queue, const Buffer& buffer,
                           uint64_t offset, std::span<std::byte> data);

}  // namespace kad::client
