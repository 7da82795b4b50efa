// The daemon <-> worker framing (server/worker/worker_protocol.h) over a
// real socketpair: messages read in batches keep their boundaries, a passed
// descriptor reaches the message it was sent with even when earlier
// messages arrive in the same read, and a peer that sends too much or hangs
// up is an error, not a hang.
#include "server/worker/worker_protocol.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kad::server::worker {
namespace {

class WorkerProtocol : public ::testing::Test {
 protected:
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    a_ = fds[0];
    b_ = fds[1];
  }
  void TearDown() override {
    if (a_ >= 0) close(a_);
    if (b_ >= 0) close(b_);
  }
  int a_ = -1, b_ = -1;
};

// A peer that stops reading cannot hold a sender for good: a message larger
// than the socket's buffer ends DEADLINE_EXCEEDED once nothing more has
// been taken for the timeout, and one that is read meanwhile goes whole.
TEST_F(WorkerProtocol, ASendToAPeerThatStopsReadingEndsAtItsTimeout) {
  Connection sender(a_);
  const std::vector<std::byte> big(8 << 20);
  const absl::Time start = absl::Now();
  const absl::Status stalled = sender.send(Op::kLoadKernel, big, {}, -1, absl::Milliseconds(300));
  EXPECT_EQ(stalled.code(), absl::StatusCode::kDeadlineExceeded) << stalled;
  EXPECT_NE(stalled.message().find("stopped reading"), absl::string_view::npos) << stalled;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));

  // A fresh pair, whose peer reads: the same message arrives whole.
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  Connection writer(fds[0]), reader(fds[1]);
  size_t received = 0;
  std::thread drain([&] {
    std::vector<std::byte> chunk(1 << 16);
    while (received < sizeof(Header) + big.size()) {
      size_t got = 0;
      int fd = -1;
      if (!reader.receive_some(chunk, &got, &fd, absl::Now() + absl::Seconds(30)).ok()) break;
      received += got;
    }
  });
  EXPECT_TRUE(writer.send(Op::kLoadKernel, big, {}, -1, absl::Milliseconds(300)).ok());
  drain.join();
  EXPECT_EQ(received, sizeof(Header) + big.size());
  close(fds[0]);
  close(fds[1]);
}

// A peer that takes some now and then, too slowly, holds a sender no longer
// than one that takes nothing: the whole message has its bound (the timeout, and a
// second for each Connection::kSlowestRead bytes).
TEST_F(WorkerProtocol, ASendToAPeerThatReadsALittleAtATimeEndsAtItsBound) {
  Connection sender(a_);
  const std::vector<std::byte> big(2 << 20);
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    // All that has arrived, every 250 ms (within the timeout each time:
    // about 800 KiB/s), for 5 s at most.
    const absl::Time give_up = absl::Now() + absl::Seconds(5);
    std::vector<std::byte> some(1 << 20);
    while (!done.load() && absl::Now() < give_up) {
      if (read(b_, some.data(), some.size()) <= 0) break;
      absl::SleepFor(absl::Milliseconds(250));
    }
  });
  const absl::Time start = absl::Now();
  const absl::Status stalled = sender.send(Op::kCompile, big, {}, -1, absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - start;
  done.store(true);
  trickle.join();
  EXPECT_EQ(stalled.code(), absl::StatusCode::kDeadlineExceeded) << stalled;
  EXPECT_NE(stalled.message().find("of the 2097168 bytes of a message in"), absl::string_view::npos)
      << stalled;
  // 300 ms and 1/8 s for each of its 2 MiB, where the peer would have
  // taken 2.5 s.
  EXPECT_LT(took, absl::Seconds(2)) << stalled;
}

TEST_F(WorkerProtocol, ADescriptorReachesItsOwnMessageBehindOthersInTheSameRead) {
  Connection sender(a_), receiver(b_);
  const int memfd = memfd_create("kad-test", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  ASSERT_EQ(ftruncate(memfd, 4096), 0);
  const IdRecord freed{7};
  const ImportRecord imported{8, 4096};
  ASSERT_TRUE(sender.send(Op::kFreeBuffer, bytes_of(freed)).ok());
  ASSERT_TRUE(sender.send(Op::kFreeBuffer, bytes_of(freed)).ok());
  ASSERT_TRUE(sender.send(Op::kImportBuffer, bytes_of(imported), {}, memfd).ok());
  close(memfd);

  MessageReader reader(receiver);
  Header h;
  std::span<const std::byte> payload;
  int fd = -2;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(reader.next(&h, &payload, &fd, absl::Now() + absl::Seconds(5), 1024).ok());
    EXPECT_EQ(h.op, static_cast<uint32_t>(Op::kFreeBuffer));
    EXPECT_EQ(fd, -1) << "message " << i << " took the descriptor";
  }
  ASSERT_TRUE(reader.next(&h, &payload, &fd, absl::Now() + absl::Seconds(5), 1024).ok());
  EXPECT_EQ(h.op, static_cast<uint32_t>(Op::kImportBuffer));
  ASSERT_EQ(payload.size(), sizeof(ImportRecord));
  ImportRecord got;
  std::memcpy(&got, payload.data(), sizeof got);
  EXPECT_EQ(got.buffer, 8u);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(lseek(fd, 0, SEEK_END), 4096);  // the memfd itself
  close(fd);
}

TEST_F(WorkerProtocol, ALargeMessageArrivesWholeBetweenSmallOnes) {
  Connection sender(a_), receiver(b_);
  std::vector<std::byte> big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::byte>(i * 7);
  std::thread writer([&] {
    const IdRecord small{1};
    EXPECT_TRUE(sender.send(Op::kWait, bytes_of(small)).ok());
    EXPECT_TRUE(sender.send(Op::kCompile, big).ok());
    EXPECT_TRUE(sender.send(Op::kWait, bytes_of(small)).ok());
  });
  MessageReader reader(receiver);
  Header h;
  std::span<const std::byte> payload;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  ASSERT_TRUE(reader.next(&h, &payload, nullptr, deadline, 8 << 20).ok());
  EXPECT_EQ(payload.size(), sizeof(IdRecord));
  ASSERT_TRUE(reader.next(&h, &payload, nullptr, deadline, 8 << 20).ok());
  EXPECT_EQ(h.op, static_cast<uint32_t>(Op::kCompile));
  EXPECT_TRUE(std::equal(payload.begin(), payload.end(), big.begin(), big.end()));
  ASSERT_TRUE(reader.next(&h, &payload, nullptr, deadline, 8 << 20).ok());
  EXPECT_EQ(h.op, static_cast<uint32_t>(Op::kWait));
  writer.join();
}

TEST_F(WorkerProtocol, AMessageOverTheLimitIsRefusedBeforeItIsRead) {
  Connection sender(a_), receiver(b_);
  std::vector<std::byte> payload_bytes(4096);
  ASSERT_TRUE(sender.send(Op::kStatus, payload_bytes).ok());
  MessageReader reader(receiver);
  Header h;
  std::span<const std::byte> payload;
  const absl::Status s = reader.next(&h, &payload, nullptr, absl::Now() + absl::Seconds(5), 1024);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("4096 bytes"), std::string::npos) << s;
}

TEST_F(WorkerProtocol, SilenceIsADeadlineAndAHangUpIsUnavailable) {
  Connection sender(a_), receiver(b_);
  MessageReader reader(receiver);
  Header h;
  std::span<const std::byte> payload;
  EXPECT_EQ(reader.next(&h, &payload, nullptr, absl::Now() + absl::Milliseconds(50), 1024).code(),
            absl::StatusCode::kDeadlineExceeded);
  close(a_);
  a_ = -1;
  EXPECT_EQ(reader.next(&h, &payload, nullptr, absl::Now() + absl::Seconds(5), 1024).code(),
            absl::StatusCode::kUnavailable);
  // And sending to a peer that is gone is an error, not SIGPIPE.
  Connection back(b_);
  const IdRecord r{1};
  EXPECT_EQ(back.send(Op::kWait, bytes_of(r)).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace kad::server::worker
