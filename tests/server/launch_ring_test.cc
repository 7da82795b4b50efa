// LaunchRing (server/worker/launch_ring.h): launches from kad to a worker
// through shared memory. Both sides run here on two mappings of one memfd,
// as kad and its worker map it: launches come out whole and in order, a
// full ring or an untaken socket launch sends kad to the socket, and a
// worker that writes positions it cannot have reached is refused.
#include "server/worker/launch_ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kad::server::worker {
namespace {

struct TwoSides {
  std::unique_ptr<LaunchRing> kad, worker;
};

TwoSides make_ring() {
  TwoSides t;
  absl::StatusOr<std::unique_ptr<LaunchRing>> kad = LaunchRing::create();
  EXPECT_TRUE(kad.ok()) << kad.status();
  absl::StatusOr<std::unique_ptr<LaunchRing>> worker =
      LaunchRing::map(fcntl((*kad)->fd(), F_DUPFD_CLOEXEC, 0));
  EXPECT_TRUE(worker.ok()) << worker.status();
  t.kad = *std::move(kad);
  t.worker = *std::move(worker);
  return t;
}

std::span<const std::byte> bytes(const std::string& s) { return std::as_bytes(std::span(s)); }
std::string text(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

TEST(LaunchRing, LaunchesComeOutWholeAndInOrderPastTheRingsSize) {
  TwoSides t = make_ring();
  for (uint64_t i = 0; i < 3 * LaunchRing::kSlots; ++i) {
    const std::string launch = "launch " + std::to_string(i);
    absl::StatusOr<bool> written = t.kad->try_write(bytes(launch));
    ASSERT_TRUE(written.ok()) << written.status();
    ASSERT_TRUE(*written);
    ASSERT_TRUE(t.worker->has_next());
    EXPECT_EQ(text(t.worker->next()), launch);
    t.worker->take();
    EXPECT_FALSE(t.worker->has_next());
  }
}

TEST(LaunchRing, AnAnswerFindsTheWorkerHasReadEveryMessageKadSentAndNoMore) {
  TwoSides t = make_ring();
  EXPECT_TRUE(t.kad->check_messages_read().ok());
  t.kad->note_message();
  t.kad->note_message();
  EXPECT_TRUE(t.worker->message_owed(0));
  EXPECT_TRUE(t.worker->message_owed(1));
  EXPECT_FALSE(t.worker->message_owed(2));
  t.worker->note_message_read();
  absl::Status behind = t.kad->check_messages_read();
  EXPECT_EQ(behind.code(), absl::StatusCode::kInternal);
  EXPECT_NE(behind.message().find("read 1 socket messages; kad sent 2"), std::string::npos)
      << behind;
  t.worker->note_message_read();
  EXPECT_TRUE(t.kad->check_messages_read().ok());
  // A message kad sent without counting it (the worker read it at its
  // periodic look): every later one would wait for that look too.
  t.worker->note_message_read();
  absl::Status ahead = t.kad->check_messages_read();
  EXPECT_EQ(ahead.code(), absl::StatusCode::kInternal);
  EXPECT_NE(ahead.message().find("read 3 socket messages; kad sent 2"), std::string::npos) << ahead;
}

TEST(LaunchRing, AFullRingSendsTheNextLaunchToTheSocketAndLaterOnesFollowItThere) {
  TwoSides t = make_ring();
  for (uint64_t i = 0; i < LaunchRing::kSlots; ++i) ASSERT_TRUE(*t.kad->try_write(bytes("x")));
  EXPECT_FALSE(*t.kad->try_write(bytes("full"))) << "a full ring took a launch";
  t.kad->note_socket_launch();  // that one went by the socket
  t.worker->take();             // room again, but the socket's launch is not taken yet
  EXPECT_FALSE(*t.kad->try_write(bytes("after"))) << "a launch would pass the socket's";
  t.worker->note_socket_launch_taken();
  EXPECT_TRUE(*t.kad->try_write(bytes("after")));
}

TEST(LaunchRing, PositionsTheWorkerCannotHaveReachedEndIt) {
  TwoSides t = make_ring();
  ASSERT_TRUE(*t.kad->try_write(bytes("one")));
  t.worker->take();
  t.worker->take();  // took a launch never written
  absl::StatusOr<bool> written = t.kad->try_write(bytes("two"));
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(written.status().message().find("2 of 1 launches taken"), std::string::npos)
      << written.status();

  TwoSides u = make_ring();
  u.worker->note_socket_launch_taken();  // one kad never sent
  EXPECT_FALSE(u.kad->try_write(bytes("one")).ok());
}

TEST(LaunchRing, ASleepingWorkerIsWokenByALaunch) {
  TwoSides t = make_ring();
  std::thread worker([&] {
    while (!t.worker->has_next()) t.worker->sleep(absl::Seconds(30), [] { return false; });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let it fall asleep
  const auto began = std::chrono::steady_clock::now();
  ASSERT_TRUE(*t.kad->try_write(bytes("wake")));
  t.kad->wake();
  worker.join();
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(10))
      << "the worker slept through the launch";
}

// The race a worker's last look before it sleeps leaves open: kad writes a
// launch and wakes the worker after the worker found the ring empty, but
// before it is asleep. That wake must not be lost: a lost one left the
// launch waiting for the worker's periodic look, 5 s later (about one
// worker-shm/pipelined benchmark repetition in six ran at a tenth of its
// rate). `more_to_read` is the last thing the worker asks before it
// sleeps: kad's write and wake happen there, as in the race.
TEST(LaunchRing, ALaunchWrittenJustBeforeTheWorkerSleepsWakesIt) {
  TwoSides t = make_ring();
  const auto began = std::chrono::steady_clock::now();
  t.worker->sleep(absl::Seconds(5), [&] {
    EXPECT_TRUE(*t.kad->try_write(bytes("late")));
    t.kad->wake();
    return false;
  });
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(2))
      << "the worker slept through a launch written as it fell asleep";
  ASSERT_TRUE(t.worker->has_next());
  EXPECT_EQ(text(t.worker->next()), "late");
}

// The same for a message kad sent on the socket as the worker fell asleep.
TEST(LaunchRing, AMessageSentJustBeforeTheWorkerSleepsWakesIt) {
  TwoSides t = make_ring();
  const auto began = std::chrono::steady_clock::now();
  t.worker->sleep(absl::Seconds(5), [&] {
    t.kad->note_message();
    t.kad->wake();
    return false;
  });
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(2))
      << "the worker slept through a message sent as it fell asleep";
  EXPECT_TRUE(t.worker->message_owed(0));
}

// A worker asks kad for kernels' builds for the wide device
// (wide_builds.h) through the ring: kad takes each once, in order.
TEST(LaunchRing, WideWantsReachKadOnceEachInTheOrderAsked) {
  TwoSides t = make_ring();
  std::vector<uint64_t> taken;
  t.kad->take_wide_wants([&](uint64_t id) { taken.push_back(id); });
  EXPECT_TRUE(taken.empty());
  t.worker->want_wide(7);
  t.worker->want_wide(9);
  t.kad->take_wide_wants([&](uint64_t id) { taken.push_back(id); });
  EXPECT_EQ(taken, (std::vector<uint64_t>{7, 9}));
  t.kad->take_wide_wants([&](uint64_t id) { taken.push_back(id); });
  EXPECT_EQ(taken.size(), 2u) << "taken twice";
}

// The count of wants is the worker's: one that leaps or goes back gives kad
// no more than the ring's entries to look at (each of which kad checks).
TEST(LaunchRing, AScribbledWideWantCountGivesKadAtMostTheRingsEntries) {
  TwoSides t = make_ring();
  void* page =
      mmap(nullptr, LaunchRing::kHeaderBytes, PROT_READ | PROT_WRITE, MAP_SHARED, t.kad->fd(), 0);
  ASSERT_NE(page, MAP_FAILED);
  auto* header = static_cast<LaunchRingHeader*>(page);
  for (const uint64_t count : {uint64_t{1} << 60, uint64_t{3}}) {
    header->wide_wants.store(count);
    uint64_t n = 0;
    t.kad->take_wide_wants([&](uint64_t) { ++n; });
    EXPECT_LE(n, LaunchRingHeader::kWideWants) << count;
    EXPECT_GT(n, 0u) << count;
  }
  munmap(page, LaunchRing::kHeaderBytes);
}

}  // namespace
}  // namespace kad::server::worker
