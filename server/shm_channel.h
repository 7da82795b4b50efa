// One shared-memory channel: a client's queue served through rings in a
// memfd instead of gRPC messages (DESIGN §6). Its own thread consumes
// submission records, runs them on the engine, and posts completions. A
// channel ends — with a reason written for the client and logged — when its
// client goes away, writes garbage, or stops reading completions; the daemon
// and the other clients are unaffected.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "kad/shm/v1/layout.h"
#include "server/engine.h"
#include "server/shm_decode.h"
#include "server/shm_rings.h"
#include "server/worker/queue_progress.h"

namespace kad::server {

struct ShmOptions {
  // How long a full completion ring may stay full before the channel ends.
  int64_t stall_timeout_ms = 10000;
};

class ShmChannel final : public ChannelLoans::Lender {
 public:
  // Creates the channel's memory; `socket` is the client's side-socket
  // connection (owned from now on).
  static absl::StatusOr<std::unique_ptr<ShmChannel>> create(Engine& engine,
                                                            std::shared_ptr<Session> session,
                                                            uint64_t queue, int socket,
                                                            ShmOptions options);
  ~ShmChannel() override;  // stops the thread, unmaps, closes

  int memfd() const { return memfd_; }
  // Starts the channel's thread; RESOURCE_EXHAUSTED when the process may
  // start no more (its thread or memory limit): the channel is refused, kad
  // goes on.
  absl::Status start();
  bool finished() const { return finished_.load(); }
  void stop() { stop_.store(true); }
  // ChannelLoans::Lender: asks the worker that serves the channel to give it
  // back, and this channel's thread to take it.
  void recall() override;

 private:
  ShmChannel(Engine& engine, std::shared_ptr<Session> session, uint64_t queue, int socket,
             ShmOptions options)
      : engine_(engine),
        session_(std::move(session)),
        queue_(queue),
        socket_(socket),
        options_(options) {}

  // The channel's header, where the rings' words are: for other threads
  // than the channel's, which may be re-making rings_ meanwhile.
  shm::v1::ChannelHeader& header() const {
    return *reinterpret_cast<shm::v1::ChannelHeader*>(memory_);
  }
  void run();
  // Runs one record into completion_; whether its completion goes back.
  bool execute(const shm::v1::SubmitRecord& record);
  // Posts completion_, waiting for room; false when the channel must end.
  bool post();
  bool client_gone() const;
  // Counts the channel among the busy ones (its client submitted within the
  // last wait), or no longer.
  void set_busy(bool busy);
  void end(const std::string& reason);
  // The direct path, after each record kad served: counts launches like
  // the last (synchronous or pipelined), and once the client has repeated
  // one kLoanAfter times, lends the channel to the session's worker after
  // a synchronous launch, or after a wait that leaves the queue with
  // nothing in flight (pipelined launches end there); serves nothing
  // itself until it is back. Whether it lent the channel.
  bool consider_loan();
  // Lends the channel, if the queue and the session allow it now.
  bool lend();
  // Whether a lent channel's worker may answer a record like `r` (other
  // than a launch like the plan's): such records do not break a run.
  static bool worker_may_serve(const shm::v1::SubmitRecord& r);
  bool serve_lent(const Engine::ChannelLoan& loan);
  // Why kad wants a lent channel back now, if it does (`p`: the loan's page).
  std::optional<LoanEnd> reason_to_recall(const worker::QueueProgress& p);

  Engine& engine_;
  std::shared_ptr<Session> session_;
  std::optional<SessionSlot> slot_;  // one of the session's channels
  Charge memory_charge_;             // of the daemon's host memory: the channel's rings
  uint64_t queue_;
  int socket_;
  ShmOptions options_;
  int memfd_ = -1;
  uint8_t* memory_ = nullptr;
  std::optional<ChannelRings> rings_;  // in memory_
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> session_closed_{false};  // set by the session's close listener
  uint64_t close_listener_ = 0;
  std::atomic<bool> finished_{false};
  shm::v1::SubmitRecord record_{};  // private copy of the slot being run
  CompletionBuilder completion_;
  DecodedLaunch decoded_;
  // The direct path: what execute() found of the record (the event of a
  // launch the worker could serve, 0 for anything else; whether a wait
  // succeeded), the newest launch like the candidate, the record it
  // repeats, how often in a row, the choice kad made for it (the fields of
  // its completion that say so), and the worker's page while lent.
  static constexpr uint32_t kLoanAfter = 4;
  static constexpr uint64_t kShortLoan = 16;
  static constexpr uint32_t kLongestLoanWait = 1024;
  uint32_t loan_after_ = kLoanAfter;  // launches in a row before the next loan
  EventId launch_event_ = 0;
  bool waited_ = false;
  EventId planned_event_ = 0;
  shm::v1::SubmitRecord candidate_{};
  shm::v1::CompletionRecord candidate_choice_{};
  uint32_t repeats_ = 0;
  bool lent_before_ = false;  // logged once per channel
  std::atomic<worker::QueueProgress*> lent_progress_{nullptr};
  // A recall asked for since the channel's last loan began: the scheduler
  // may ask before serve_lent has the worker's progress page.
  std::atomic<bool> recall_asked_{false};
  // The channel thread's: whether it counts among the busy channels, and
  // whether its waits spin first.
  bool busy_ = false;
  bool spin_ = true;
};

}  // namespace kad::server
