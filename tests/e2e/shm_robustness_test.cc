// The shared-memory channel against bad clients, at the byte level: garbage
// records, out-of-range ring indices, foreign handles, a bad hello, a client
// that stops reading completions, a client killed mid-launch. Each ends that
// request or that channel with a clear reason; a bystander client keeps being
// served (checked after each test).
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "kad/shm/v1/handshake.h"
#include "kad/shm/v1/layout.h"
#include "kad/shm/v1/ring.h"
#include "tests/e2e/e2e.h"
#include "tests/support/worker_process.h"

namespace kad {
namespace {

using client::Arg;
using client::ArgSpec;
using ::testing::HasSubstr;
using ::testing::Optional;
using namespace shm::v1;
using testing::bytes_of;

// A hand-driven channel: what a broken or hostile client could do.
class RawChannel {
 public:
  // Sends a Hello; returns the reply (and maps the channel when it is OK).
  Reply open(const std::string& socket_path, const std::string& session, uint64_t queue,
             size_t hello_bytes = sizeof(Hello), bool keep_memfd = false) {
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    Hello hello{};
    hello.request = static_cast<uint32_t>(Request::kHello);
    hello.version = kVersion;
    std::memcpy(hello.session_id, session.data(),
                std::min(session.size(), sizeof(hello.session_id)));
    hello.queue = queue;
    send(fd_, &hello, hello_bytes, 0);
    Reply reply{};
    int memfd = -1;
    receive_reply(fd_, &reply, &memfd);
    if (reply.code == 0 && memfd >= 0) {
      memory_ = static_cast<uint8_t*>(
          mmap(nullptr, reply.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0));
      header_ = reinterpret_cast<ChannelHeader*>(memory_);
      if (keep_memfd)
        memfd_ = memfd;
      else
        close(memfd);
    }
    return reply;
  }
  int memfd() const { return memfd_; }
  ~RawChannel() {
    if (memfd_ >= 0) close(memfd_);
    if (memory_) munmap(memory_, kChannelBytes);
    if (fd_ >= 0) close(fd_);
  }

  SubmitRecord& slot() {
    auto* slots = reinterpret_cast<SubmitRecord*>(memory_ + kSubmitOffset);
    SubmitRecord& r = slots[tail_ % kSubmitSlots];
    std::memset(&r, 0, sizeof(r));
    r.tag = tail_ + 1;
    return r;
  }
  void publish() {
    header_->submit.tail.store(++tail_);
    notify(&header_->submit.tail, &header_->submit.consumer_waiting);
  }
  // The next completion, or nullopt after `timeout`.
  std::optional<CompletionRecord> next(
      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (header_->completion.tail.load() == head_) {
      if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    CompletionRecord c;
    std::memcpy(&c, memory_ + kCompletionOffset + (head_ % kCompletionSlots) * sizeof(c),
                sizeof(c));
    header_->completion.head.store(++head_);
    return c;
  }
  std::string message(const CompletionRecord& c) {
    return std::string(c.message, c.message_length);
  }
  // Whether kad hangs up the side socket within `timeout`: it has reaped
  // the channel.
  bool hung_up_within(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLRDHUP, 0};
    return poll(&p, 1, static_cast<int>(timeout.count())) > 0 &&
           (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
  }
  // Why kad ended the channel, if it did within `timeout`: its last message
  // on the socket (UNAVAILABLE, without an fd). kad also writes why into the
  // header, but frees the header with the rest once it reaps the channel,
  // which may come first.
  std::optional<std::string> ended_within(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0 || (p.revents & POLLIN) == 0)
      return std::nullopt;
    Reply last{};
    int memfd = -1;
    if (!shm::v1::receive_reply(fd_, &last, &memfd, /*wait=*/false)) return std::nullopt;
    EXPECT_EQ(memfd, -1);
    if (memfd >= 0) close(memfd);
    EXPECT_EQ(last.code, static_cast<int32_t>(absl::StatusCode::kUnavailable));
    return std::string(last.message, std::min<size_t>(last.message_length, sizeof(last.message)));
  }
  ChannelHeader* header() { return header_; }
  uint32_t tail() const { return tail_; }

 private:
  int fd_ = -1;
  int memfd_ = -1;  // kept when asked, to try what a hostile client would
  uint8_t* memory_ = nullptr;
  ChannelHeader* header_ = nullptr;
  uint32_t tail_ = 0, head_ = 0;
};

class ShmRobustness : public testing::DaemonSuite {
 protected:
  static void SetUpTestSuite() {
    auto d = testing::Daemon::start({"--shm-stall-timeout-ms", "300"});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = d->release();
  }
  void SetUp() override {
    owner_ = connect(daemon().unix_uri() + "?transport=grpc", "owner");
    auto q = owner_->create_queue();
    ASSERT_TRUE(q.ok());
    queue_ = *std::move(q);
    auto m = owner_->load_module(
        "kernel void fill(KAD_CONTEXT, global int* out, int v) {\n"
        "  if (kad_active()) out[kad_global_linear()] = v;\n}\n");
    auto k = owner_->get_kernel(
        *m, {.entry = "fill",
             .args = {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kI32)}});
    auto b = owner_->allocate(64 * sizeof(int32_t));
    ASSERT_TRUE(k.ok() && b.ok());
    kernel_ = *k;
    buffer_ = *b;
  }
  void TearDown() override {
    testing::expect_bystander_served(daemon().unix_uri(), 9, testing::kFillSource, true);
  }
  std::string shm_path() { return daemon().unix_uri().substr(5) + ".shm"; }
  void fill_launch(SubmitRecord& r) {
    r.op = static_cast<uint32_t>(Op::kLaunch);
    r.flags = kHasNdrange;
    r.kernel = kernel_.handle;
    r.rank = 1;
    r.extents[0] = 64;
    r.nargs = 2;
    r.args[0] = {static_cast<uint8_t>(shm::v1::ArgKind::kBuffer), 0, {}, buffer_.handle};
    r.args[1] = {static_cast<uint8_t>(shm::v1::ArgKind::kScalar), 5 /* I32 */, {}, 7};
  }

  std::unique_ptr<Client> owner_;
  std::unique_ptr<client::Queue> queue_;
  client::Kernel kernel_;
  client::Buffer buffer_;
};

TEST_F(ShmRobustness, AGoodRecordLaunches) {
  RawChannel c;
  ASSERT_EQ(c.open(shm_path(), owner_->session_id(), queue_->handle()).code, 0);
  fill_launch(c.slot());
  c.publish();
  auto done = c.next();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->code, 0) << c.message(*done);
  EXPECT_NE(done->event, 0u);
}

// A submitted launch (Queue::submit) is answered only when it fails: the
// completions that come are the failure's and the next answered record's.
TEST_F(ShmRobustness, ASubmittedLaunchIsAnsweredOnlyWhenItFails) {
  RawChannel c;
  ASSERT_EQ(c.open(shm_path(), owner_->session_id(), queue_->handle()).code, 0);
  SubmitRecord& good = c.slot();  // tag 1
  fill_launch(good);
  good.op = static_cast<uint32_t>(Op::kSubmit);
  c.publish();
  SubmitRecord& bad = c.slot();  // tag 2
  fill_launch(bad);
  bad.op = static_cast<uint32_t>(Op::kSubmit);
  bad.kernel = 987654;
  c.publish();
  c.slot().op = static_cast<uint32_t>(Op::kPing);  // tag 3
  c.publish();
  auto failed = c.next();
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->tag, 2u);
  EXPECT_EQ(failed->code, static_cast<int32_t>(absl::StatusCode::kNotFound));
  EXPECT_THAT(c.message(*failed), HasSubstr("session has no kernel 987654"));
  auto pinged = c.next();
  ASSERT_TRUE(pinged);
  EXPECT_EQ(pinged->tag, 3u);
  EXPECT_EQ(pinged->code, 0);
  EXPECT_FALSE(c.next(std::chrono::milliseconds(50))) << "nothing else is answered";
}

// The channel belongs to its session: when the session closes (its client
// left), the daemon ends the channel and says why, as it ends Submit streams.
TEST_F(ShmRobustness, AChannelEndsWhenItsSessionCloses) {
  auto leaving = connect(daemon().unix_uri() + "?transport=grpc", "leaving");
  auto q = leaving->create_queue();
  ASSERT_TRUE(q.ok());
  RawChannel c;
  ASSERT_EQ(c.open(shm_path(), leaving->session_id(), (*q)->handle()).code, 0);
  SubmitRecord& ping = c.slot();
  ping.op = static_cast<uint32_t>(Op::kPing);
  c.publish();
  ASSERT_TRUE(c.next());
  q->reset();
  leaving.reset();  // closes the session; the raw channel stays mapped here
  EXPECT_EQ(c.ended_within(std::chrono::seconds(5)),
            "the session this channel belongs to has closed");
}

// While more channels are busy than the cores can spin for (a client and
// kad's channel thread waiting on each other: two waiters each), kad tells
// every channel's client to sleep at once instead of spinning, and sleeps at
// once itself; once they go idle (a wait of 100 ms with nothing), one alone
// spins again.
TEST_F(ShmRobustness, ChannelsSleepAtOnceWhileMoreAreBusyThanTheCoresCanSpinFor) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int busy = CPU_COUNT(&set) / 2 + 1;
  std::vector<std::unique_ptr<client::Queue>> queues;
  std::vector<std::unique_ptr<RawChannel>> channels;
  for (int i = 0; i < busy; ++i) {
    auto q = owner_->create_queue();
    ASSERT_TRUE(q.ok()) << q.status();
    channels.push_back(std::make_unique<RawChannel>());
    ASSERT_EQ(channels.back()->open(shm_path(), owner_->session_id(), (*q)->handle()).code, 0);
    queues.push_back(*std::move(q));
  }
  auto ping = [](RawChannel& c) {
    c.slot().op = static_cast<uint32_t>(Op::kPing);
    c.publish();
  };
  auto sleep_at_once = [](RawChannel& c) { return c.header()->sleep_at_once.load() == 1; };
  // Each channel thread decides before each wait: rounds of pings until all
  // have decided with every channel busy.
  bool all_sleep = false;
  for (int round = 0; round < 100 && !all_sleep; ++round) {
    for (auto& c : channels) ping(*c);
    for (auto& c : channels) ASSERT_TRUE(c->next());
    all_sleep =
        std::all_of(channels.begin(), channels.end(), [&](auto& c) { return sleep_at_once(*c); });
  }
  EXPECT_TRUE(all_sleep) << busy << " busy channels on " << CPU_COUNT(&set) << " cores";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // all idle
  bool spins = false;
  for (int round = 0; round < 100 && !spins; ++round) {
    ping(*channels[0]);
    ASSERT_TRUE(channels[0]->next());
    spins = !sleep_at_once(*channels[0]);
  }
  EXPECT_TRUE(spins) << "one busy channel alone";
}

TEST_F(ShmRobustness, GarbageRecordsFailThatRequestOnly) {
  RawChannel c;
  ASSERT_EQ(c.open(shm_path(), owner_->session_id(), queue_->handle()).code, 0);
  struct Case {
    std::function<void(SubmitRecord&)> spoil;
    int code;
    std::string text;
  };
  const std::vector<Case> cases = {
      {[](SubmitRecord& r) { r.op = 99; }, 3,
       "operation 99, not launch, submit, run, wait, copy in, copy out or ping"},
      {[](SubmitRecord& r) { r.rank = 9; }, 3, "rank 9"},
      {[](SubmitRecord& r) { r.nargs = 5000; }, 3, "5000 arguments"},
      {[](SubmitRecord& r) { r.args[0].kind = 77; }, 3, "argument 0 has kind 77"},
      {[](SubmitRecord& r) { r.args[1].scalar = 200; }, 3, "scalar type 200"},
      {[](SubmitRecord& r) { r.extents[0] = -5; }, 3, "negative extent -5"},
      {[](SubmitRecord& r) { r.nargs = 1; }, 3, "takes 2 arguments, the launch gave 1"},
      {[](SubmitRecord& r) { r.kernel = 424242; }, 5, "no kernel 424242"},
      {[](SubmitRecord& r) { r.args[0].value = 31337; }, 5, "names buffer 31337"},
      {[](SubmitRecord& r) {
         r.op = static_cast<uint32_t>(Op::kCopyIn);
         r.buffer = 1;
         r.size = 64;
         r.arena_offset = kArenaBytes - 8;
       },
       3, "does not fit in the"},
      {[](SubmitRecord& r) {
         r.op = static_cast<uint32_t>(Op::kWait);
         r.event = 99999;
       },
       5, "event 99999 was never issued"},
  };
  for (const Case& k : cases) {
    SubmitRecord& r = c.slot();
    fill_launch(r);
    k.spoil(r);
    c.publish();
    auto done = c.next();
    ASSERT_TRUE(done) << k.text;
    EXPECT_EQ(done->code, k.code) << k.text << ": " << c.message(*done);
    EXPECT_THAT(c.message(*done), HasSubstr(k.text));
  }
  // The channel still serves a good record.
  fill_launch(c.slot());
  c.publish();
  auto done = c.next();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->code, 0) << c.message(*done);
}

// A completion goes to the client whole: past its message's length its
// bytes are zeros, never what kad's memory held before. Each round, another
// session's channel answers errors and ends, and a channel opened next
// reaps it in kad (kad reaps ended channels after it serves a hello), so
// that the channel opened after that likely takes its memory: the bug this
// guards against sent such a channel's heap bytes, the other session's
// messages among them.
TEST_F(ShmRobustness, AnAnswerCarriesNoBytesPastItsMessage) {
  auto other = connect(daemon().unix_uri() + "?transport=grpc", "other");
  auto other_queue = other->create_queue();
  ASSERT_TRUE(other_queue.ok());
  auto no_bytes_past_message = [](const CompletionRecord& done) {
    const size_t n = std::min<size_t>(done.message_length, sizeof(done.message));
    return std::all_of(done.message + n, done.message + sizeof(done.message),
                       [](char c) { return c == 0; });
  };
  for (int round = 0; round < 8; ++round) {
    {
      RawChannel noisy;
      ASSERT_EQ(noisy.open(shm_path(), other->session_id(), (*other_queue)->handle()).code, 0);
      for (int i = 0; i < 3; ++i) {
        noisy.slot().op = 99;
        noisy.publish();
        auto refused = noisy.next();
        ASSERT_TRUE(refused);
        EXPECT_NE(refused->code, 0);
        EXPECT_TRUE(no_bytes_past_message(*refused));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));  // kad sees it gone
    RawChannel reaper;
    ASSERT_EQ(reaper.open(shm_path(), other->session_id(), (*other_queue)->handle()).code, 0);
    RawChannel c;
    ASSERT_EQ(c.open(shm_path(), owner_->session_id(), queue_->handle()).code, 0);
    c.slot().op = static_cast<uint32_t>(Op::kPing);
    c.publish();
    auto pinged = c.next();
    ASSERT_TRUE(pinged);
    EXPECT_EQ(pinged->code, 0) << c.message(*pinged);
    EXPECT_EQ(pinged->message_length, 0u);
    EXPECT_TRUE(no_bytes_past_message(*pinged))
        << "round " << round << ": a ping's answer carried "
        << absl::CHexEscape(absl::string_view(pinged->message, 96));
    // An answer after an error on the same channel carries none of it.
    c.slot().op = 99;
    c.publish();
    auto refused = c.next();
    ASSERT_TRUE(refused);
    c.slot().op = static_cast<uint32_t>(Op::kPing);
    c.publish();
    auto again = c.next();
    ASSERT_TRUE(again);
    EXPECT_TRUE(no_bytes_past_message(*again)) << "a ping after an error";
  }
}

// A session that a command of its holds (a copy waiting behind a launch
// that spins until its deadline) holds up no other client's handshake: its
// own Hello is refused UNAVAILABLE once it has waited kSessionWait (2 s),
// and meanwhile another session opens a channel and launches through it.
// (When kad answered Hellos one at a time, the bystander waited for the
// launch's deadline.)
TEST_F(ShmRobustness, ABusySessionHoldsUpNoOtherSessionsHandshake) {
  auto holder = connect(daemon().unix_uri() + "?transport=grpc", "holder");
  auto q = holder->create_queue("", absl::Seconds(5));
  auto flag = holder->allocate(sizeof(int32_t));
  auto m = holder->load_module(
      "kernel void spin(KAD_CONTEXT, global volatile int* flag) {\n"
      "  if (kad_active()) { while (flag[0] == 0) { } }\n}\n");
  ASSERT_TRUE(q.ok() && flag.ok() && m.ok()) << m.status();
  auto k = holder->get_kernel(*m, {.entry = "spin", .args = {ArgSpec::buffer()}});
  ASSERT_TRUE(k.ok()) << k.status();
  const client::Arg args[] = {client::Arg::buffer(*flag)};
  ASSERT_TRUE((*q)->launch(*k, client::Dims{1}, nullptr, args).ok());
  absl::Status copied;
  std::thread copy([&] {  // waits in kad, holding the session, for the launch
    const int32_t one = 1;
    copied = (*q)->write(*flag, 0, std::as_bytes(std::span(&one, 1)));
  });
  absl::SleepFor(absl::Milliseconds(300));
  Reply refused{};
  std::thread own_hello([&] {
    RawChannel c;
    refused = c.open(shm_path(), holder->session_id(), (*q)->handle());
  });
  absl::SleepFor(absl::Milliseconds(100));  // its Hello is in kad

  const absl::Time start = absl::Now();
  testing::expect_bystander_served(daemon().unix_uri() + "?transport=shm", 11, testing::kFillSource,
                                   /*shared_memory=*/true);
  const absl::Duration served = absl::Now() - start;
  own_hello.join();
  copy.join();
  EXPECT_LT(served, absl::Seconds(3)) << "another session's handshake waited for the busy one";
  EXPECT_EQ(refused.code, static_cast<int32_t>(absl::StatusCode::kUnavailable));
  EXPECT_THAT(std::string(refused.message, std::min<size_t>(refused.message_length, 240)),
              ::testing::HasSubstr("the session is busy"));
}

TEST_F(ShmRobustness, RecordsNamingAnotherSessionsObjectsAreNotFound) {
  auto stranger = connect(daemon().unix_uri() + "?transport=grpc", "stranger");
  auto their_queue = stranger->create_queue();
  ASSERT_TRUE(their_queue.ok());
  RawChannel c;
  ASSERT_EQ(c.open(shm_path(), stranger->session_id(), (*their_queue)->handle()).code, 0);
  fill_launch(c.slot());  // the owner's kernel and buffer handles
  c.publish();
  auto done = c.next();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->code, 5) << c.message(*done);
}

TEST_F(ShmRobustness, ABadHelloIsRefused) {
  RawChannel bogus;
  Reply r = bogus.open(shm_path(), "ffffffffffffffffffffffffffffffff", 1);
  EXPECT_EQ(r.code, 5);
  EXPECT_THAT(std::string(r.message, r.message_length), HasSubstr("no open session"));
  RawChannel foreign_queue;
  r = foreign_queue.open(shm_path(), owner_->session_id(), 987654);
  EXPECT_EQ(r.code, 5);
  EXPECT_THAT(std::string(r.message, r.message_length), HasSubstr("no queue 987654"));
  RawChannel short_hello;
  r = short_hello.open(shm_path(), owner_->session_id(), queue_->handle(), 7);
  EXPECT_EQ(r.code, 3);
  EXPECT_THAT(std::string(r.message, r.message_length), HasSubstr("got 7 bytes"));
}

TEST_F(ShmRobustness, OutOfRangeRingIndicesEndTheChannel) {
  RawChannel c;
  ASSERT_EQ(c.open(shm_path(), owner_->session_id(), queue_->handle()).code, 0);
  c.header()->submit.tail.store(100000);
  notify(&c.header()->submit.tail, &c.header()->submit.consumer_waiting);
  EXPECT_THAT(c.ended_within(std::chrono::seconds(5)),
              Optional(HasSubstr("submission ring indices out of range")));
}

// kad frees an ended channel's memory as soon as it reaps the channel,
// however long the client maps it, header and all: why it ended waits in the
// client's socket instead, which costs kad nothing. (When kad kept no word of
// it elsewhere, a client that looked only after the reaping read a zeroed
// header: not closed, ring indices back at 0, no reason.)
TEST_F(ShmRobustness, AReapedChannelsClientStillLearnsWhyItEnded) {
  RawChannel c;
  ASSERT_EQ(c.open(shm_path(), owner_->session_id(), queue_->handle()).code, 0);
  c.header()->submit.tail.store(100000);
  notify(&c.header()->submit.tail, &c.header()->submit.consumer_waiting);
  ASSERT_TRUE(c.hung_up_within(std::chrono::seconds(5)));
  // The channel's destructor frees its memory, then closes the socket.
  EXPECT_EQ(c.header()->closed.load(), 0u) << "the header went with the rest";
  EXPECT_EQ(c.header()->submit.tail.load(), 0u);
  EXPECT_THAT(c.ended_within(std::chrono::seconds(0)),
              Optional(HasSubstr("submission ring indices out of range (head 0, tail 100000)")));
}

// kad counts the completions it posted itself: a client that rewrites the
// completion ring's tail moves nothing of kad's, and the next answer lands
// in the slot after the last.
TEST_F(ShmRobustness, ACompletionTailTheClientRewritesIsNotKads) {
  RawChannel c;
  ASSERT_EQ(c.open(shm_path(), owner_->session_id(), queue_->handle()).code, 0);
  for (int i = 1; i <= 3; ++i) {
    c.slot().op = static_cast<uint32_t>(Op::kPing);
    c.publish();
    // kad's answer sets the tail to its own count: i.
    for (const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
         c.header()->completion.tail.load() != static_cast<uint32_t>(i) &&
         std::chrono::steady_clock::now() < give_up;) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    ASSERT_EQ(c.header()->completion.tail.load(), static_cast<uint32_t>(i));
    auto done = c.next();
    ASSERT_TRUE(done) << "ping " << i;
    EXPECT_EQ(done->tag, static_cast<uint64_t>(i));
    EXPECT_EQ(done->code, 0) << c.message(*done);
    c.header()->completion.tail.store(200 + i);  // not kad's to be told
  }
}

TEST_F(ShmRobustness, AClientThatStopsReadingCompletionsLosesItsChannel) {
  RawChannel c;
  ASSERT_EQ(c.open(shm_path(), owner_->session_id(), queue_->handle()).code, 0);
  for (uint32_t i = 0; i < kCompletionSlots + 8; ++i) {
    while (c.tail() - c.header()->submit.head.load() >= kSubmitSlots && !c.header()->closed.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a well-behaved producer
    SubmitRecord& r = c.slot();
    r.op = static_cast<uint32_t>(Op::kWait);
    c.publish();
  }
  EXPECT_THAT(c.ended_within(std::chrono::seconds(10)),
              Optional(HasSubstr("read no completion for 300 ms")));
}

// The memfd of a zero-copy buffer, as MapBuffer hands it to the client.
int map_buffer_memfd(const std::string& socket_path, const std::string& session, uint64_t buffer,
                     Reply* reply) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  MapBuffer request{};
  request.request = static_cast<uint32_t>(Request::kMapBuffer);
  request.version = kVersion;
  std::memcpy(request.session_id, session.data(),
              std::min(session.size(), sizeof(request.session_id)));
  request.buffer = buffer;
  send(fd, &request, sizeof(request), 0);
  int memfd = -1;
  receive_reply(fd, reply, &memfd);
  close(fd);
  return memfd;
}

// What a hostile client tries on a memfd: shrink it (the daemon's next access
// would die of SIGBUS), grow it, or add a seal of its own. Each must fail.
void expect_sealed_against_resizing(int memfd, uint64_t bytes) {
  ASSERT_GE(memfd, 0);
  const int seals = fcntl(memfd, F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
      << "seals: " << seals;
  EXPECT_EQ(ftruncate(memfd, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(ftruncate(memfd, static_cast<off_t>(bytes / 2)), -1);
  EXPECT_EQ(ftruncate(memfd, static_cast<off_t>(bytes * 2)), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(fallocate(memfd, 0, 0, static_cast<off_t>(bytes * 2)), -1);
  EXPECT_EQ(fcntl(memfd, F_ADD_SEALS, F_SEAL_WRITE), -1);
  struct stat st {};
  ASSERT_EQ(fstat(memfd, &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), bytes);
}

TEST_F(ShmRobustness, AChannelsMemfdCannotBeResizedAndTheChannelKeepsServing) {
  RawChannel c;
  const Reply opened =
      c.open(shm_path(), owner_->session_id(), queue_->handle(), sizeof(Hello), true);
  ASSERT_EQ(opened.code, 0);
  expect_sealed_against_resizing(c.memfd(), opened.bytes);
  fill_launch(c.slot());
  c.publish();
  auto done = c.next();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->code, 0) << c.message(*done);
}

TEST_F(ShmRobustness, AZeroCopyBuffersMemfdCannotBeResizedAndTheBufferKeepsWorking) {
  Reply reply{};
  const int memfd = map_buffer_memfd(shm_path(), owner_->session_id(), buffer_.handle, &reply);
  ASSERT_EQ(reply.code, 0) << std::string(reply.message, reply.message_length);
  expect_sealed_against_resizing(memfd, reply.bytes);
  close(memfd);
  // The daemon and the device still use the whole buffer.
  const Arg args[] = {Arg::buffer(buffer_), Arg::scalar<int32_t>(41)};
  ASSERT_TRUE(queue_->launch(kernel_, client::Dims{64}, nullptr, args).ok());
  std::vector<int32_t> got(64);
  ASSERT_TRUE(queue_->read(buffer_, 0, bytes_of(got)).ok());
  EXPECT_EQ(got, std::vector<int32_t>(64, 41));
}

// Memory kad lets go of is freed at once, in every mapping of it: a client
// that keeps a freed buffer's or an ended channel's memfd mapped reads zeros
// and holds none of it. Otherwise a client could keep, channel after
// channel, memory the kernel charges to kad (to its cgroup) long after kad's
// own count (--max-host-memory) and the client's quotas had given it back.
TEST_F(ShmRobustness, MemoryKadLetsGoIsFreedWhileTheClientStillMapsIt) {
  auto blocks = [](int fd) {
    struct stat st {};
    return fstat(fd, &st) == 0 ? st.st_blocks : -1;
  };
  auto freed_within = [&](int fd, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (blocks(fd) != 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return blocks(fd) == 0;
  };

  constexpr int64_t kInts = 1 << 18;
  auto b = owner_->allocate(kInts * sizeof(int32_t));
  ASSERT_TRUE(b.ok()) << b.status();
  Reply reply{};
  const int memfd = map_buffer_memfd(shm_path(), owner_->session_id(), b->handle, &reply);
  ASSERT_EQ(reply.code, 0) << std::string(reply.message, reply.message_length);
  auto* mapped =
      static_cast<const int32_t*>(mmap(nullptr, reply.bytes, PROT_READ, MAP_SHARED, memfd, 0));
  ASSERT_NE(mapped, MAP_FAILED);
  const Arg args[] = {Arg::buffer(*b), Arg::scalar<int32_t>(41)};
  ASSERT_TRUE(queue_->launch(kernel_, client::Dims{kInts}, nullptr, args).ok());
  ASSERT_TRUE(queue_->wait().ok());
  EXPECT_EQ(mapped[kInts - 1], 41);
  EXPECT_GT(blocks(memfd), 0);
  ASSERT_TRUE(owner_->free(*b).ok());
  EXPECT_TRUE(freed_within(memfd, std::chrono::seconds(5)))
      << blocks(memfd) << " blocks of a freed buffer stay";
  EXPECT_EQ(mapped[kInts - 1], 0);
  munmap(const_cast<int32_t*>(mapped), reply.bytes);
  close(memfd);

  auto leaving = connect(daemon().unix_uri() + "?transport=grpc", "leaving");
  auto q = leaving->create_queue();
  ASSERT_TRUE(q.ok());
  RawChannel c;
  ASSERT_EQ(c.open(shm_path(), leaving->session_id(), (*q)->handle(), sizeof(Hello), true).code, 0);
  SubmitRecord& ping = c.slot();
  ping.op = static_cast<uint32_t>(Op::kPing);
  c.publish();
  ASSERT_TRUE(c.next());
  EXPECT_GT(blocks(c.memfd()), 0);
  q->reset();
  leaving.reset();  // the channel ends with its session; its mapping stays here
  EXPECT_TRUE(freed_within(c.memfd(), std::chrono::seconds(5)))
      << blocks(c.memfd()) << " blocks of an ended channel stay";
}

// CPU seconds kad's shared-memory channel threads ("kad-shm") have used.
double channel_threads_cpu_seconds(pid_t kad) {
  double ticks = 0;
  std::error_code ec;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", kad, "/task"), ec)) {
    const std::string stat = testing::read_proc_file((task.path() / "stat").string());
    const size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    if (stat.substr(open + 1, close - open - 1) != "kad-shm") continue;
    std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
    if (fields.size() > 12) ticks += std::stod(fields[11]) + std::stod(fields[12]);  // utime, stime
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// An idle channel's thread sleeps: it spins only while launches come, not
// again after each of its periodic wake-ups with nothing to do (a review
// found 256 idle channels, one tenant's default quota, costing over a core).
TEST_F(ShmRobustness, IdleChannelsCostNoCpu) {
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::unique_ptr<client::Queue>> queues;
  for (int c = 0; c < 2; ++c) {
    clients.push_back(connect(daemon().unix_uri(), "idle"));
    for (int q = 0; q < 24; ++q) {
      auto queue = clients.back()->create_queue();
      ASSERT_TRUE(queue.ok()) << queue.status();
      ASSERT_TRUE((*queue)->shared_memory());
      queues.push_back(*std::move(queue));
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // all idle now
  const double before = channel_threads_cpu_seconds(daemon().pid());
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const double used = channel_threads_cpu_seconds(daemon().pid()) - before;
  EXPECT_LT(used, 0.15) << "48 idle channels used " << used << " CPU seconds in 3 s";
}

TEST_F(ShmRobustness, AClientKilledMidLaunchIsReclaimed) {
  auto observer = connect(daemon().tcp_uri(), "observer");
  const auto before = observer->status();
  ASSERT_TRUE(before.ok());
  const std::string ready = "/tmp/kad-shm-hold-" + std::to_string(getpid());
  std::filesystem::remove(ready);
  const pid_t holder =
      testing::spawn({KAD_TEST_CLIENT_PATH, daemon().unix_uri() + "?transport=shm", "hold", ready});
  for (int i = 0; i < 3000 && !std::filesystem::exists(ready); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(ready));
  kill(holder, SIGKILL);
  testing::wait_exit(holder);
  std::filesystem::remove(ready);
  client::ServiceStatus after;
  for (int i = 0; i < 500; ++i) {
    after = *observer->status();
    if (after.sessions == before->sessions && after.buffers == before->buffers) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(after.sessions, before->sessions);
  EXPECT_EQ(after.buffers, before->buffers);
  EXPECT_EQ(after.queues, before->queues);
}

}  // namespace
}  // namespace kad
