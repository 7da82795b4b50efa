#include "server/channel_loans.h"

#include <algorithm>
#include <utility>

namespace kad::server {

absl::string_view loan_end_name(LoanEnd why) {
  switch (why) {
    case LoanEnd::kHandedBack:
      return "handed_back";
    case LoanEnd::kContention:
      return "contention";
    case LoanEnd::kHeld:
      return "held";
    case LoanEnd::kSessionClosed:
      return "session_closed";
    case LoanEnd::kClientGone:
      return "client_gone";
    case LoanEnd::kDraining:
      return "draining";
    case LoanEnd::kDeadline:
      return "deadline";
    case LoanEnd::kWorkerLost:
      return "worker_lost";
    case LoanEnd::kStopping:
      return "stopping";
  }
  return "unknown";
}

ChannelLoans::Hold::~Hold() {
  if (loans_ != nullptr) loans_->release(queue_);
}

void ChannelLoans::add(Lender* lender, uint64_t queue) {
  absl::MutexLock lock(&mu_);
  entries_.push_back({lender, queue, false});
}

void ChannelLoans::remove(Lender* lender) {
  absl::MutexLock lock(&mu_);
  std::erase_if(entries_, [lender](const Entry& e) { return e.lender == lender; });
}

bool ChannelLoans::holds(uint64_t queue) const {
  return all_holds_ > 0 || holds_[queue % kBuckets] > 0;
}

bool ChannelLoans::any_lent(uint64_t queue) const {
  return std::any_of(entries_.begin(), entries_.end(), [queue](const Entry& e) {
    return e.lent && (queue == 0 || e.queue == queue);
  });
}

bool ChannelLoans::begin_loan(Lender* lender) {
  absl::MutexLock lock(&mu_);
  for (Entry& e : entries_) {
    if (e.lender != lender) continue;
    if (holds(e.queue)) return false;
    e.lent = true;
    return true;
  }
  return false;
}

void ChannelLoans::returned(Lender* lender) {
  absl::MutexLock lock(&mu_);
  for (Entry& e : entries_)
    if (e.lender == lender) e.lent = false;
}

bool ChannelLoans::held(uint64_t queue) const {
  absl::MutexLock lock(&mu_);
  return holds(queue);
}

ChannelLoans::Hold ChannelLoans::hold(uint64_t queue) {
  absl::MutexLock lock(&mu_);
  ++(queue == 0 ? all_holds_ : holds_[queue % kBuckets]);
  if (any_lent(queue)) {
    for (Entry& e : entries_)
      if (e.lent && (queue == 0 || e.queue == queue)) e.lender->recall();
    // The lenders' threads take their channels back, each within its
    // launch's deadline (or end the worker that holds it).
    std::pair<ChannelLoans*, uint64_t> asked(this, queue);
    mu_.Await(absl::Condition(
        +[](std::pair<ChannelLoans*, uint64_t>* a)
             ABSL_NO_THREAD_SAFETY_ANALYSIS { return !a->first->any_lent(a->second); },
        &asked));
  }
  return Hold(this, queue);
}

void ChannelLoans::release(uint64_t queue) {
  absl::MutexLock lock(&mu_);
  --(queue == 0 ? all_holds_ : holds_[queue % kBuckets]);
}

}  // namespace kad::server
