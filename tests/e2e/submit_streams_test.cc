// How kad serves Submit streams (--submit-streams): on a thread each (the
// default), or as reactors that hold no thread while they wait for their
// client. Either way a stream ends when its session closes, saying why.
// (ClientConformance's "tcp_reactors" transport runs the client's whole
// conformance suite over reactors.)
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/wire_session.h"
#include "tests/support/worker_process.h"

namespace kad {
namespace {

using ::testing::HasSubstr;
using testing::WireSession;

class SubmitStreams : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto d = testing::Daemon::start({"--submit-streams", GetParam()});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
  }

  // kad's threads now, from /proc.
  int daemon_threads() const {
    const std::string status =
        testing::read_proc_file(absl::StrCat("/proc/", daemon_->pid(), "/status"));
    for (absl::string_view line : absl::StrSplit(status, '\n')) {
      int n = 0;
      if (absl::ConsumePrefix(&line, "Threads:") &&
          absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &n))
        return n;
    }
    ADD_FAILURE() << "no Threads: line in kad's /proc status";
    return 0;
  }

  static v1::QueueCommand copy_out(uint64_t queue, uint64_t buffer, uint64_t size) {
    v1::QueueCommand c;
    c.set_queue(queue);
    c.mutable_copy_out()->set_buffer(buffer);
    c.mutable_copy_out()->set_size(size);
    return c;
  }

  std::unique_ptr<testing::Daemon> daemon_;
};

// 48 more open streams, each having run a command: a thread each on
// threads; none on reactors, give or take the few that serve them while
// they run.
TEST_P(SubmitStreams, StreamsWaitingForTheirClientsHoldThreadsOnlyOnThreads) {
  std::vector<std::unique_ptr<WireSession>> sessions;
  std::vector<uint64_t> queues;
  std::vector<std::unique_ptr<WireSession::Stream>> streams;
  v1::QueueCommand ping;
  ping.mutable_ping();
  // Warm: a stream of each session first, so that what starts once is started.
  for (int i = 0; i < 4; ++i) {
    sessions.push_back(std::make_unique<WireSession>(daemon_->tcp_uri(), "streams"));
    queues.push_back(sessions.back()->create_queue());
    streams.push_back(std::make_unique<WireSession::Stream>(*sessions.back()));
    ping.set_queue(queues.back());
    ASSERT_EQ(streams.back()->send(ping).code(), 0);
  }
  const int before = daemon_threads();
  for (int i = 0; i < 48; ++i) {
    streams.push_back(std::make_unique<WireSession::Stream>(*sessions[i % 4]));
    ping.set_queue(queues[i % 4]);
    ASSERT_EQ(streams.back()->send(ping).code(), 0);
  }
  const int added = daemon_threads() - before;
  std::printf("kad's threads: %d, then +%d for 48 more streams\n", before, added);
  if (GetParam() == "reactors") {
    EXPECT_LE(added, 8) << "kad had " << before << " threads before 48 more streams";
  } else {
    // gRPC's sync server: a thread per stream, and no second one of kad's
    // (a stream over a socket writes its replies from the thread that reads).
    EXPECT_GE(added, 40) << "kad had " << before << " threads before 48 more streams";
    EXPECT_LE(added, 60) << "kad had " << before << " threads before 48 more streams";
  }
  streams.clear();
  testing::expect_bystander_served(daemon_->tcp_uri());
}

// A client that sends copy_outs of 1 MiB and never reads their replies
// makes kad hold a few MiB for its stream, not one per copy: kad stops
// reading the stream's commands (on threads its writes block; a reactor
// counts the bytes it holds), so a command posted behind 96 such copies has
// not run a second later. Once the client reads, every reply comes, in order.
TEST_P(SubmitStreams, AClientThatReadsNoRepliesMakesKadStopReadingItsCommands) {
  WireSession s(daemon_->tcp_uri(), "unread");
  const uint64_t queue = s.create_queue(), other_queue = s.create_queue();
  constexpr uint64_t kMiB = 1 << 20;
  constexpr int kCopies = 96;
  const uint64_t big = s.allocate(kMiB), marker = s.allocate(4);
  auto stream = std::make_unique<WireSession::Stream>(s);
  for (int i = 0; i < kCopies; ++i) ASSERT_TRUE(stream->post(copy_out(queue, big, kMiB)));
  v1::QueueCommand mark;
  mark.set_queue(queue);
  mark.mutable_copy_in()->set_buffer(marker);
  mark.mutable_copy_in()->set_data(std::string("\x01\x02\x03\x04", 4));
  ASSERT_TRUE(stream->post(mark));
  absl::SleepFor(absl::Seconds(1));  // 96 MiB of copies would take kad ~0.1 s

  WireSession::Stream look(s);
  const v1::QueueReply before = look.send(copy_out(other_queue, marker, 4));
  ASSERT_EQ(before.code(), 0) << before.message();
  EXPECT_EQ(before.data(), std::string(4, '\0')) << "kad ran every command of a stream whose "
                                                    "client reads no replies, holding "
                                                 << kCopies << " MiB of them";

  for (int i = 1; i <= kCopies + 1; ++i) {
    v1::QueueReply reply;
    ASSERT_TRUE(stream->read(&reply)) << "reply " << i;
    EXPECT_EQ(reply.tag(), static_cast<uint64_t>(i));
    EXPECT_EQ(reply.code(), 0) << reply.message();
    EXPECT_EQ(reply.data().size(), i <= kCopies ? kMiB : 0) << "reply " << i;
  }
  EXPECT_TRUE(stream->finish().ok());
  EXPECT_EQ(look.send(copy_out(other_queue, marker, 4)).data(), "\x01\x02\x03\x04");
  testing::expect_bystander_served(daemon_->tcp_uri());
}

TEST_P(SubmitStreams, AStreamEndsWhenItsSessionClosesSayingWhy) {
  WireSession s(daemon_->tcp_uri(), "closing");
  const grpc::Status end = testing::close_session_under_a_stream(s, s.create_queue());
  // A thread's stream is cancelled (gRPC sends no status then); a reactor's
  // ends with the reason.
  if (GetParam() == "reactors") {
    EXPECT_EQ(end.error_code(), grpc::StatusCode::ABORTED);
    EXPECT_THAT(end.error_message(), HasSubstr("the session this stream belongs to has closed"));
  } else {
    EXPECT_FALSE(end.ok());
  }
  testing::expect_bystander_served(daemon_->tcp_uri());
}

// A stream whose wait blocks (on a kernel that never ends, until its launch
// deadline) holds back no other session's stream: on reactors its command
// holds a thread of the pool, which grows.
TEST_P(SubmitStreams, AWaitThatBlocksHoldsBackNoOtherSessionsStream) {
  // What a first bystander starts once (its kernel compiled, workers
  // started) is not what the bound below measures.
  testing::expect_bystander_served(daemon_->tcp_uri());
  auto looper = Client::connect(daemon_->tcp_uri(), "looper");
  ASSERT_TRUE(looper.ok()) << looper.status();
  auto queue = (*looper)->create_queue("", absl::Seconds(3));
  auto flag = (*looper)->allocate(sizeof(int32_t));
  auto module = (*looper)->load_module(
      "kernel void spin(KAD_CONTEXT, global volatile int* flag) {\n"
      "  if (kad_active()) { while (flag[0] == 0) { } }\n}\n");
  ASSERT_TRUE(queue.ok() && flag.ok() && module.ok());
  auto spin =
      (*looper)->get_kernel(*module, {.entry = "spin", .args = {client::ArgSpec::buffer()}});
  ASSERT_TRUE(spin.ok()) << spin.status();
  const client::Arg args[] = {client::Arg::buffer(*flag)};
  ASSERT_TRUE((*queue)->launch(*spin, client::Dims{1}, nullptr, args).ok());
  absl::Status waited;
  std::thread waiter([&] { waited = (*queue)->wait(); });
  absl::SleepFor(absl::Milliseconds(200));  // the wait is in kad now

  auto other = Client::connect(daemon_->tcp_uri(), "other");
  ASSERT_TRUE(other.ok()) << other.status();
  auto other_queue = (*other)->create_queue();
  ASSERT_TRUE(other_queue.ok());
  // Pings (answered where they are read) and a saxpy's launch, wait and
  // copies (run on the pool).
  const absl::Time start = absl::Now();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE((*other_queue)->ping().ok());
  testing::expect_bystander_served(daemon_->tcp_uri());
  const absl::Duration served = absl::Now() - start;
  waiter.join();
  EXPECT_LT(served, absl::Seconds(2)) << "another session's commands waited for the blocked one";
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded) << waited;
}

INSTANTIATE_TEST_SUITE_P(Modes, SubmitStreams, ::testing::Values("threads", "reactors"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kad
