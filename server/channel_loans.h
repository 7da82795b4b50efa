// A session's shared-memory channels that kad may lend to the session's own
// worker (the direct path, server/README.md): while one is lent, the worker
// serves its client's records and kad's view of that queue stands still.
// So a request that must find a queue as kad keeps it — a launch, wait or
// copy on it that came another way, a free or a release that a lent plan
// may name — holds that queue's channels back: none is lent while it runs,
// and one that is comes back first (within its launch's deadline: a
// worker that does not give it back is ended).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace kad::server {

// Why a loan ended, as kad counts them (kad_channel_loan_ends_total).
enum class LoanEnd : uint8_t {
  kHandedBack,     // the client sent what the worker leaves to kad
  kContention,     // the device's scheduler: another tenant, more queues than units, a wait
  kHeld,           // a request of the session that must find the queue as kad keeps it
  kSessionClosed,  // the session closed
  kClientGone,     // the client hung up
  kDraining,       // kad drains (SIGTERM)
  kDeadline,       // a launch, or the hand-back, past its deadline: the worker was ended
  kWorkerLost,     // the worker died
  kStopping,       // kad stops
};
inline constexpr size_t kLoanEnds = static_cast<size_t>(LoanEnd::kStopping) + 1;
// The reason's label value: handed_back, contention, held, session_closed,
// client_gone, draining, deadline, worker_lost, stopping.
absl::string_view loan_end_name(LoanEnd why);

class ChannelLoans {
 public:
  // A channel kad may lend: recall() asks its thread to take it back now
  // (it must not block); the thread then calls returned().
  class Lender {
   public:
    virtual ~Lender() = default;
    virtual void recall() = 0;
  };

  // While held, `queue`'s channels (every queue's, for 0) are not lent.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept : loans_(other.loans_), queue_(other.queue_) {
      other.loans_ = nullptr;
    }
    Hold& operator=(Hold&&) = delete;
    ~Hold();

   private:
    friend class ChannelLoans;
    Hold(ChannelLoans* loans, uint64_t queue) : loans_(loans), queue_(queue) {}
    ChannelLoans* loans_ = nullptr;
    uint64_t queue_ = 0;
  };

  void add(Lender* lender, uint64_t queue);
  void remove(Lender* lender);

  // The lender's thread: whether it may lend its channel now (no request
  // holds its queue back); if so, it counts as lent until returned().
  bool begin_loan(Lender* lender);
  void returned(Lender* lender);
  // Whether a request holds `queue` back: a lent channel's thread then
  // takes it back.
  bool held(uint64_t queue) const;

  // Holds `queue`'s channels back (0: every queue's), once those lent have
  // come back.
  [[nodiscard]] Hold hold(uint64_t queue);

 private:
  struct Entry {
    Lender* lender;
    uint64_t queue;
    bool lent;
  };
  bool holds(uint64_t queue) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool any_lent(uint64_t queue) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void release(uint64_t queue);

  // Holds of one queue are counted in its bucket (queue % kBuckets), holds of
  // every queue apart: no allocation on the launch path that takes them,
  // and no growth with the handles a client names. Queues that share a
  // bucket hold each other back, which costs a loan, never correctness.
  static constexpr size_t kBuckets = 64;
  mutable absl::Mutex mu_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::array<uint32_t, kBuckets> holds_ ABSL_GUARDED_BY(mu_) = {};
  uint32_t all_holds_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kad::server
