// One Submit stream (kad.v1.Kad/Submit) on gRPC's callback API.
//
// gRPC reads the stream's commands on its callback threads; each command
// runs on the CommandPool (it may block), in order, one at a time, and the
// thread that ran it writes its reply, or queues it behind a reply still
// being written. Up to kCommands commands are read ahead of the one
// running. A stream holds no thread while it waits for its client, and at
// most one while its commands run.
//
// Replies not yet written pile up to kReplies (more than kad's client
// leaves unread, Queue::kMaxInFlight), and the bytes of those replies and of
// the commands read ahead to about kHeldBytes; past either the stream reads
// no more commands until replies go. A client that never reads its replies
// (copy_outs of 1 MiB) thus makes kad hold a few MiB for its stream, as a
// stream on a thread does (its writes block), not kReplies MiB. A slot
// keeps no large message once used.
//
// When the session closes, the stream sends one last reply (tag 0, ABORTED,
// saying why) after the one being written and ends; commands not yet run
// are dropped.
#pragma once

#include <grpcpp/grpcpp.h>

#include <array>
#include <memory>
#include <vector>

#include "kad/v1/kad.grpc.pb.h"
#include "server/command_pool.h"
#include "server/session.h"

namespace kad::server {

class KadService;

class SubmitReactor final : public grpc::ServerBidiReactor<v1::QueueCommand, v1::QueueReply>,
                            private CommandPool::Task {
 public:
  static constexpr size_t kReplies = 512;
  // A message whose bytes held more than this gives them back once used:
  // an idle stream keeps no megabytes of its last copies.
  static constexpr size_t kKeptBytes = 64 << 10;
  // Past this many bytes in replies not yet written and commands not yet
  // run, no more commands are read.
  static constexpr size_t kHeldBytes = 4 << 20;

  // Starts reading. Deletes itself when gRPC is done with the stream.
  SubmitReactor(KadService& service, CommandPool& pool, std::shared_ptr<Session> session,
                SessionSlot slot);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  ~SubmitReactor();
  // On the pool: runs the commands read, in order, queuing their replies.
  void run() override;
  // Runs the command read `command_at`th into the `reply_at`th reply.
  void run_one(uint64_t command_at, uint64_t reply_at);
  // The command read `command_at`th has run into the `reply_at`th reply:
  // its bytes go, the reply's come.
  void ran_locked(uint64_t command_at, uint64_t reply_at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The session closed: its close listener posts this, which must not
  // start gRPC's operations itself (it runs under the session's lock).
  struct SessionEnd final : CommandPool::Task {
    explicit SessionEnd(SubmitReactor& r) : reactor(r) {}
    void run() override;
    SubmitReactor& reactor;
  };

  // What to start once mu_ is released: gRPC's Start* and Finish are not
  // called under it.
  struct Next {
    const v1::QueueReply* write = nullptr;
    bool read = false;
    v1::QueueCommand* read_into = nullptr;
    bool finish = false;
    grpc::Status status;  // the stream's, when it finishes
  };
  // Whether a reply can be written now, the next command read, or the
  // stream finished; marks it started. A write or read makes the caller
  // one of starting_, until it calls next_locked again (start() does).
  Next next_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts `next`, then what has become possible meanwhile.
  void start(Next next) ABSL_LOCKS_EXCLUDED(mu_);

  KadService& service_;
  CommandPool& pool_;
  const std::shared_ptr<Session> session_;
  SessionSlot slot_;
  uint64_t listener_ = 0;
  uint64_t queue_ = 0;  // the queue the stream is bound to, by its first command

  static constexpr size_t kCommands = 8;  // read ahead while one runs
  std::array<v1::QueueCommand, kCommands> commands_;
  std::array<size_t, kCommands> command_bytes_ ABSL_GUARDED_BY(mu_) = {};

  absl::Mutex mu_;
  // Replies in order: [head_, tail_) are waiting to be written, the head
  // one being written while writing_.
  // A slot is the running thread's until tail_ passes it, then mu_'s.
  std::vector<v1::QueueReply> replies_;
  uint64_t head_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t tail_ ABSL_GUARDED_BY(mu_) = 0;
  v1::QueueReply last_;  // the session's end, written last
  SessionEnd session_end_{*this};
  uint64_t read_ ABSL_GUARDED_BY(mu_) = 0;  // commands read: [ran_, read_) wait to run
  uint64_t ran_ ABSL_GUARDED_BY(mu_) = 0;
  // Bytes of the commands read and not yet run, and of the replies'
  // data not yet written.
  size_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;     // a read is started
  bool running_ ABSL_GUARDED_BY(mu_) = false;     // a command is posted or running
  bool writing_ ABSL_GUARDED_BY(mu_) = false;     // a write is started
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;  // the client sent its last, or left
  bool broken_ ABSL_GUARDED_BY(mu_) = false;      // a write failed: the client left
  bool session_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool last_written_ ABSL_GUARDED_BY(mu_) = false;  // last_ is started
  bool writing_last_ ABSL_GUARDED_BY(mu_) = false;  // the write started is last_
  bool end_posted_ ABSL_GUARDED_BY(mu_) = false;    // session_end_ is posted, not yet run
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool constructed_ ABSL_GUARDED_BY(mu_) = false;  // nothing starts before
  int starting_ ABSL_GUARDED_BY(mu_) = 0;          // threads about to start an operation
};

}  // namespace kad::server
