// ChannelLoans (server/channel_loans.h): a request that must find a queue as
// kad keeps it holds the queue's lent channels back — none is lent while it
// runs, and one that is lent is recalled and comes back before it goes on.
#include "server/channel_loans.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace kad::server {
namespace {

// A channel whose thread gives the loan back a moment after it is recalled.
class SlowLender final : public ChannelLoans::Lender {
 public:
  explicit SlowLender(ChannelLoans& loans) : loans_(loans) {}
  ~SlowLender() override {
    if (giver_.joinable()) giver_.join();
  }
  void recall() override {
    ++recalls_;
    if (giver_.joinable()) return;
    giver_ = std::thread([this] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      back_.store(true);
      loans_.returned(this);
    });
  }
  std::atomic<int> recalls_{0};
  std::atomic<bool> back_{false};

 private:
  ChannelLoans& loans_;
  std::thread giver_;
};

TEST(ChannelLoans, AHoldWaitsForItsQueuesLentChannelToComeBack) {
  ChannelLoans loans;
  SlowLender lender(loans);
  loans.add(&lender, 3);
  ASSERT_TRUE(loans.begin_loan(&lender));
  {
    const ChannelLoans::Hold hold = loans.hold(3);
    EXPECT_EQ(lender.recalls_.load(), 1);
    EXPECT_TRUE(lender.back_.load());  // back before the hold is had
    EXPECT_TRUE(loans.held(3));
    EXPECT_FALSE(loans.begin_loan(&lender));  // not lent again while held
  }
  EXPECT_FALSE(loans.held(3));
  EXPECT_TRUE(loans.begin_loan(&lender));
  loans.returned(&lender);
  loans.remove(&lender);
}

TEST(ChannelLoans, AHoldOfAnotherQueueLeavesALoanAloneAndAHoldOfAllRecallsIt) {
  ChannelLoans loans;
  SlowLender lender(loans);
  loans.add(&lender, 3);
  ASSERT_TRUE(loans.begin_loan(&lender));
  { const ChannelLoans::Hold other = loans.hold(4); }
  EXPECT_EQ(lender.recalls_.load(), 0);
  {
    const ChannelLoans::Hold all = loans.hold(0);
    EXPECT_EQ(lender.recalls_.load(), 1);
    EXPECT_TRUE(loans.held(3));
    EXPECT_TRUE(loans.held(77));
  }
  EXPECT_FALSE(loans.held(3));
  loans.remove(&lender);
}

TEST(ChannelLoans, HoldsOfAnyHandlesComeBackToNone) {
  // A client may name any handle: holds count in a fixed table and leave it empty.
  ChannelLoans loans;
  for (uint64_t q = 1; q < 100'000; q += 997) {
    const ChannelLoans::Hold a = loans.hold(q);
    const ChannelLoans::Hold b = loans.hold(q);
    EXPECT_TRUE(loans.held(q));
  }
  for (uint64_t q = 1; q < 200; ++q) EXPECT_FALSE(loans.held(q)) << q;
}

}  // namespace
}  // namespace kad::server
