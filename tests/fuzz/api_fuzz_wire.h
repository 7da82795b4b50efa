// The API fuzzer's side of the wire: kad.v1 stubs over a channel, request
// contexts with a deadline and the session metadata, sessions held open by
// their OpenSession stream, and the end-to-end check that a daemon still
// serves a fresh client correctly.
#pragma once

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "google/protobuf/message.h"
#include "kad/v1/kad.grpc.pb.h"

namespace kad::api_fuzz {

using Clock = std::chrono::steady_clock;

// Every request must be answered within this; a reply that does not come is a hang.
inline constexpr std::chrono::seconds kRequestDeadline{20};

// A channel to kad and its stub.
class Connection {
 public:
  explicit Connection(const std::string& uri);
  v1::Kad::Stub& stub() { return *stub_; }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Kad::Stub> stub_;
};

// A context for one request: kRequestDeadline, and the "kad-session"
// metadata set to `session` unless it is nullopt.
std::unique_ptr<grpc::ClientContext> request_context(const std::optional<std::string>& session);

// Cancels `context` after `delay` unless destroyed first: a call cancelled
// while it runs.
class DelayedCancel {
 public:
  DelayedCancel(grpc::ClientContext& context, std::chrono::microseconds delay);
  ~DelayedCancel();

 private:
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

// A session, alive while its OpenSession stream is: close() cancels the
// stream, which closes the session.
class WireSession {
 public:
  // The session, or the status kad refused it with.
  struct Opened {
    std::unique_ptr<WireSession> session;
    grpc::Status status;
  };
  // `lifetime` bounds the OpenSession stream (its deadline).
  static Opened open(v1::Kad::Stub& stub, const std::string& client_name,
                     std::chrono::seconds lifetime);
  ~WireSession();

  const std::string& id() const { return id_; }
  void close();

 private:
  WireSession() = default;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> stream_;
  std::string id_;
  bool open_ = false;
};

// A fresh session over `uri` allocates two buffers, runs saxpy on them and
// reads back the exact result. Empty on success, else what went wrong;
// `module_digest` is the digest of the module it loaded.
std::string check_fresh_session_runs_saxpy(const std::string& uri, std::string* module_digest);

// Whether process `pid` (a child of this one) still runs; else how it ended.
// It is not reaped.
bool child_alive(pid_t pid, std::string* how_it_ended);

// `message` in protobuf text form on one line, long strings and bytes cut to
// their first bytes and length.
std::string brief_text(const google::protobuf::Message& message);

}  // namespace kad::api_fuzz
