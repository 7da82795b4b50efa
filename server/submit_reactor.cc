#include "server/submit_reactor.h"

#include "server/kad_service.h"

namespace kad::server {

namespace {
constexpr char kSessionClosed[] = "the session this stream belongs to has closed: the stream ends";

// Frees what a reused message's bytes field held, if it was large.
void give_back_large(std::string* bytes) {
  if (bytes->capacity() > SubmitReactor::kKeptBytes) std::string().swap(*bytes);
}

// What a command read holds: a ping's bytes are not counted (a ping is
// answered where it is read, and its round trip is the floor measured).
size_t bytes_of(const v1::QueueCommand& command) {
  return command.command_case() == v1::QueueCommand::kPing ? 0 : command.ByteSizeLong();
}
}  // namespace

SubmitReactor::SubmitReactor(KadService& service, CommandPool& pool,
                             std::shared_ptr<Session> session, SessionSlot slot)
    : service_(service),
      pool_(pool),
      session_(std::move(session)),
      slot_(std::move(slot)),
      replies_(kReplies) {
  last_.set_code(static_cast<int32_t>(absl::StatusCode::kAborted));
  last_.set_message(kSessionClosed);
  // Runs at once if the session has closed already.
  listener_ = session_->add_close_listener([this] {
    absl::MutexLock lock(&mu_);
    if (finished_ || session_closed_) return;
    session_closed_ = true;
    if (!constructed_) return;  // the constructor's end sees to it
    end_posted_ = true;
    pool_.post(&session_end_);
  });
  // Nothing ends the stream before this: its reactions run on gRPC's
  // threads as soon as the first read is started.
  Next next;
  {
    absl::MutexLock lock(&mu_);
    constructed_ = true;
    next = next_locked();
  }
  start(next);
}

SubmitReactor::~SubmitReactor() = default;

void SubmitReactor::OnReadDone(bool ok) {
  bool post = false, ping = false;
  uint64_t command = 0, reply = 0;
  Next next;
  {
    absl::MutexLock lock(&mu_);
    reading_ = false;
    if (!ok) {
      reads_done_ = true;
    } else if (!session_closed_ && !broken_) {
      const uint64_t read = read_++;
      const size_t bytes = bytes_of(commands_[read % kCommands]);
      command_bytes_[read % kCommands] = bytes;
      held_bytes_ += bytes;
      if (!running_) {
        running_ = true;
        // A ping, alone on the stream, is answered from this thread: it
        // cannot block, and a round trip then costs what gRPC's does.
        ping =
            read == ran_ && commands_[read % kCommands].command_case() == v1::QueueCommand::kPing;
        post = !ping;
        command = ran_;
        reply = tail_;
      }
    }
    next = next_locked();
  }
  // Started first: once posted, the command may run, and the stream end,
  // before this thread goes on (while one runs, the stream cannot end).
  start(next);
  if (ping) {
    run_one(command, reply);
    {
      absl::MutexLock lock(&mu_);
      ran_locked(command, reply);
      post = ran_ != read_;  // more came meanwhile: they run on the pool
      running_ = post;
      next = next_locked();
    }
    start(next);
  }
  if (post) pool_.post(this);
}

void SubmitReactor::run() {
  Next last;
  for (;;) {
    uint64_t command, reply;
    {
      absl::MutexLock lock(&mu_);
      if (ran_ == read_ || session_closed_ || broken_) {
        running_ = false;
        last = next_locked();
        break;
      }
      command = ran_;
      reply = tail_;
    }
    run_one(command, reply);
    Next next;
    {
      absl::MutexLock lock(&mu_);
      ran_locked(command, reply);
      next = next_locked();
    }
    start(next);  // while running_, the stream cannot end
  }
  start(last);  // the last thing: the stream may end, and this with it
}

void SubmitReactor::run_one(uint64_t command_at, uint64_t reply_at) {
  // Only the thread that runs commands touches these slots until ran_ and
  // tail_ move past them.
  service_.run_stream_command(*session_, queue_, commands_[command_at % kCommands],
                              &replies_[reply_at % kReplies]);
}

void SubmitReactor::ran_locked(uint64_t command_at, uint64_t reply_at) {
  // The slot is still this thread's: ran_ has not passed it.
  const size_t bytes = command_bytes_[command_at % kCommands];
  if (bytes > kKeptBytes) v1::QueueCommand().Swap(&commands_[command_at % kCommands]);
  held_bytes_ -= bytes;
  held_bytes_ += replies_[reply_at % kReplies].data().size();
  ++ran_;
  ++tail_;
}

void SubmitReactor::SessionEnd::run() {
  Next next;
  {
    absl::MutexLock lock(&reactor.mu_);
    reactor.end_posted_ = false;
    next = reactor.next_locked();
  }
  reactor.start(next);
}

void SubmitReactor::OnWriteDone(bool ok) {
  Next next;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      broken_ = true;  // the client left: the rest is discarded
    } else if (!writing_last_) {
      std::string* data = replies_[head_ % kReplies].mutable_data();
      held_bytes_ -= data->size();
      give_back_large(data);
      ++head_;
    }
    writing_last_ = false;
    next = next_locked();
  }
  start(next);
}

void SubmitReactor::OnCancel() {
  Next next;
  {
    absl::MutexLock lock(&mu_);
    broken_ = true;
    next = next_locked();
  }
  start(next);
}

void SubmitReactor::OnDone() {
  session_->remove_close_listener(listener_);
  delete this;
}

SubmitReactor::Next SubmitReactor::next_locked() {
  Next next;
  if (finished_ || !constructed_) return next;
  if (!writing_ && !broken_) {
    if (session_closed_) {
      if (!last_written_) {
        last_written_ = writing_last_ = writing_ = true;
        next.write = &last_;
      }
    } else if (head_ != tail_) {
      writing_ = true;
      next.write = &replies_[head_ % kReplies];
    }
  }
  // Commands are read ahead while one runs, as long as each read has a
  // slot, a reply slot waits for each, and the stream holds no more than
  // about kHeldBytes.
  if (!reading_ && !reads_done_ && !session_closed_ && !broken_ && read_ - ran_ < kCommands &&
      tail_ - head_ + (read_ - ran_) < kReplies && held_bytes_ < kHeldBytes) {
    reading_ = next.read = true;
    next.read_into = &commands_[read_ % kCommands];
  }
  if (next.write != nullptr || next.read) {
    ++starting_;
    return next;
  }
  // Not while another thread is about to start an operation: the stream
  // (and this reactor) may be gone once Finish is called.
  const bool written = broken_ || (session_closed_ ? last_written_ : head_ == tail_);
  if (starting_ == 0 && !writing_ && !running_ && !end_posted_ && written &&
      (reads_done_ || session_closed_ || broken_)) {
    finished_ = next.finish = true;
    next.status = session_closed_ ? grpc::Status(grpc::StatusCode::ABORTED, kSessionClosed)
                                  : grpc::Status::OK;
  }
  return next;
}

void SubmitReactor::start(Next next) {
  for (;;) {
    if (next.finish) {
      Finish(next.status);  // the last use of this reactor
      return;
    }
    if (next.write == nullptr && !next.read) return;
    if (next.write != nullptr) StartWrite(next.write);
    if (next.read) StartRead(next.read_into);
    absl::MutexLock lock(&mu_);
    --starting_;
    next = next_locked();
  }
}

}  // namespace kad::server
