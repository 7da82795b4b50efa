// A kad.v1 session at the wire level, as a client written against
// proto/kad/v1/kad.proto alone would hold one: the generated stub, the
// OpenSession stream kept open, the "kad-session" metadata on every call, and
// Submit streams. For tests that send what the client library never would.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "kad/v1/kad.grpc.pb.h"

namespace kad::testing {

class WireSession {
 public:
  // `uri` as kad's clients take it: unix:PATH or tcp://HOST:PORT.
  WireSession(const std::string& uri, const std::string& name)
      : channel_(grpc::CreateChannel(grpc_target(uri), grpc::InsecureChannelCredentials())),
        stub_(v1::Kad::NewStub(channel_)) {
    v1::OpenSessionRequest open;
    open.set_client_name(name);
    session_stream_ = stub_->OpenSession(&session_context_, open);
    v1::SessionEvent first;
    EXPECT_TRUE(session_stream_->Read(&first)) << "OpenSession on " << uri;
    id_ = first.session_id();
  }
  ~WireSession() { close(); }

  // Ends the session, as a client that leaves does.
  void close() { session_context_.TryCancel(); }

  const std::string& id() const { return id_; }
  v1::Kad::Stub& stub() { return *stub_; }
  // For calls of gRPC's generic stub: bytes that no generated stub sends.
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // Names the session and bounds the call, so that a hang fails the test.
  void prepare(grpc::ClientContext& context) {
    context.AddMetadata("kad-session", id_);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  }

  template <typename Request, typename Response>
  grpc::Status call(grpc::Status (v1::Kad::Stub::*method)(grpc::ClientContext*, const Request&,
                                                          Response*),
                    const Request& request, Response* response) {
    grpc::ClientContext context;
    prepare(context);
    return (stub_.get()->*method)(&context, request, response);
  }

  // The usual objects of a session, checked to exist: a queue on the
  // default device, and a buffer of `bytes` there. Their handles.
  uint64_t create_queue() {
    v1::CreateQueueResponse r;
    EXPECT_TRUE(call(&v1::Kad::Stub::CreateQueue, v1::CreateQueueRequest(), &r).ok());
    return r.queue();
  }
  uint64_t allocate(uint64_t bytes) {
    v1::AllocateBufferRequest request;
    request.set_size(bytes);
    v1::AllocateBufferResponse r;
    EXPECT_TRUE(call(&v1::Kad::Stub::AllocateBuffer, request, &r).ok());
    return r.buffer();
  }

  // One Submit stream; each command gets one reply (checked to carry its tag).
  class Stream {
   public:
    explicit Stream(WireSession& session) {
      session.prepare(context_);
      rw_ = session.stub().Submit(&context_);
    }
    ~Stream() {
      if (!done_) {
        rw_->WritesDone();
        rw_->Finish().ok();
      }
    }
    v1::QueueReply send(v1::QueueCommand command) {
      command.set_tag(++tag_);
      v1::QueueReply reply;
      EXPECT_TRUE(rw_->Write(command));
      EXPECT_TRUE(rw_->Read(&reply));
      EXPECT_EQ(reply.tag(), tag_);
      return reply;
    }
    // Sends without reading its reply (read() reads it later).
    bool post(v1::QueueCommand command) {
      command.set_tag(++tag_);
      return rw_->Write(command);
    }
    // The next reply, whatever its tag; false when the stream has ended.
    bool read(v1::QueueReply* reply) { return rw_->Read(reply); }
    grpc::Status finish() {
      done_ = true;
      rw_->WritesDone();
      return rw_->Finish();
    }

   private:
    grpc::ClientContext context_;
    std::unique_ptr<grpc::ClientReaderWriter<v1::QueueCommand, v1::QueueReply>> rw_;
    uint64_t tag_ = 0;
    bool done_ = false;
  };

 private:
  static std::string grpc_target(const std::string& uri) {
    return uri.rfind("tcp://", 0) == 0 ? uri.substr(6) : uri;
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Kad::Stub> stub_;
  grpc::ClientContext session_context_;
  std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> session_stream_;
  std::string id_;
};

// Closes `session` under one of its Submit streams, bound to `queue` by a
// ping: the stream's last reply (tag 0, ABORTED) says why, and the stream
// ends. Returns the stream's final status, which differs by how kad serves
// streams.
inline grpc::Status close_session_under_a_stream(WireSession& session, uint64_t queue) {
  WireSession::Stream stream(session);
  v1::QueueCommand ping;
  ping.set_queue(queue);
  ping.mutable_ping();
  EXPECT_EQ(stream.send(ping).code(), 0);
  session.close();
  v1::QueueReply last;
  EXPECT_TRUE(stream.read(&last)) << "the stream ended without saying why";
  EXPECT_EQ(last.tag(), 0u);
  EXPECT_EQ(last.code(), static_cast<int>(grpc::StatusCode::ABORTED));
  EXPECT_NE(last.message().find("the session this stream belongs to has closed"), std::string::npos)
      << last.message();
  EXPECT_FALSE(stream.read(&last)) << "the stream goes on after its session closed";
  return stream.finish();
}

}  // namespace kad::testing
