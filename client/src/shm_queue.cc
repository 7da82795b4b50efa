// A queue over kad's shared-memory channel: launches are fixed-size records
// written straight into the submission ring (no message, no allocation), and
// answers are read from the completion ring. A submitted launch is answered
// only when it fails. Waiting spins briefly, then sleeps on a futex. Copies
// stage through the channel's arena.
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/src/connection.h"
#include "kad/shm/v1/handshake.h"
#include "kad/shm/v1/layout.h"
#include "kad/shm/v1/ring.h"

namespace kad::client {
namespace {

using namespace shm::v1;

// Connects to the side socket; -1 with errno set on failure.
int connect_side_socket(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return -1;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Receives kad's Reply and the fd that comes with a successful one.
absl::StatusOr<std::pair<Reply, int>> receive_reply(int socket) {
  Reply reply;
  int fd;
  if (!shm::v1::receive_reply(socket, &reply, &fd)) {
    return absl::UnavailableError("kad did not answer on the shared-memory socket");
  }
  if (reply.code != 0) {
    if (fd >= 0) close(fd);
    return absl::Status(
        static_cast<absl::StatusCode>(reply.code),
        std::string(reply.message, std::min<size_t>(reply.message_length, sizeof(reply.message))));
  }
  if (fd < 0) return absl::InternalError("kad's shared-memory answer carried no memory");
  return std::make_pair(reply, fd);
}

class ShmTransport final : public Queue::Transport {
 public:
  ~ShmTransport() override {
    if (memory_) munmap(memory_, bytes_);
    if (socket_ >= 0) close(socket_);
  }

  static absl::StatusOr<std::unique_ptr<ShmTransport>> open(const Connection& c, uint64_t queue) {
    std::unique_ptr<ShmTransport> t(new ShmTransport());
    t->gone_ = c.session_gone("kad closed the shared-memory channel");
    const std::string path = c.unix_path + ".shm";
    t->socket_ = connect_side_socket(path);
    if (t->socket_ < 0) {
      return absl::UnavailableError(
          absl::StrFormat("kad offers no shared memory at %s: %s", path, std::strerror(errno)));
    }
    Hello hello{};
    hello.request = static_cast<uint32_t>(Request::kHello);
    hello.version = kVersion;
    std::memcpy(hello.session_id, c.session_id.data(),
                std::min(c.session_id.size(), sizeof(hello.session_id)));
    hello.queue = queue;
    if (send(t->socket_, &hello, sizeof(hello), MSG_NOSIGNAL) != sizeof(hello)) {
      return absl::UnavailableError("cannot send the shared-memory hello to kad");
    }
    absl::StatusOr<std::pair<Reply, int>> answer = receive_reply(t->socket_);
    if (!answer.ok()) return answer.status();
    const auto [reply, fd] = *answer;
    t->bytes_ = reply.bytes;
    void* p = mmap(nullptr, t->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED || t->bytes_ < kChannelBytes) {
      return absl::InternalError("cannot map kad's shared-memory channel");
    }
    t->memory_ = static_cast<uint8_t*>(p);
    t->header_ = static_cast<ChannelHeader*>(p);
    if (t->header_->magic != kMagic || t->header_->version != kVersion) {
      return absl::InternalError("kad's shared-memory channel has an unknown layout");
    }
    t->submit_slots_ = reinterpret_cast<SubmitRecord*>(t->memory_ + kSubmitOffset);
    t->completion_slots_ =
        reinterpret_cast<const CompletionRecord*>(t->memory_ + kCompletionOffset);
    t->arena_ = t->memory_ + kArenaOffset;
    return t;
  }

  bool shared_memory() const override { return true; }

  absl::StatusOr<LaunchInfo> launch(const Kernel& kernel, const Dims* ndrange,
                                    const Dims* workgroup, std::span<const Arg> args,
                                    const Dims* offsets) override {
    if (absl::Status s = submit(kernel, ndrange, workgroup, args, offsets, Op::kLaunch); !s.ok())
      return s;
    if (absl::Status s = answer(); !s.ok()) return s;
    return launch_info();
  }

  absl::StatusOr<LaunchInfo> run(const Kernel& kernel, const Dims* ndrange, const Dims* workgroup,
                                 std::span<const Arg> args, const Dims* offsets) override {
    if (absl::Status s = submit(kernel, ndrange, workgroup, args, offsets, Op::kRun); !s.ok())
      return s;
    if (absl::Status s = answer(); !s.ok()) return after_run(s);
    return after_run(launch_info());
  }

  absl::Status submit(const Kernel& kernel, const Dims* ndrange, const Dims* workgroup,
                      std::span<const Arg> args, const Dims* offsets) override {
    return submit(kernel, ndrange, workgroup, args, offsets, Op::kSubmit);
  }

  // The launch answered last (done_).
  LaunchInfo launch_info() const {
    LaunchInfo info;
    info.event = done_.event;
    info.linear = done_.linear != 0;
    info.index_bits = done_.index_bits;
    info.rank = done_.rank;
    info.workgroup.rank = std::min<int>(done_.workgroup_rank, kMaxRank);
    for (int d = 0; d < info.workgroup.rank; ++d)
      info.workgroup.v[static_cast<size_t>(d)] = done_.workgroup[d];
    return info;
  }

  absl::Status submit(const Kernel& kernel, const Dims* ndrange, const Dims* workgroup,
                      std::span<const Arg> args, const Dims* offsets, Op op) {
    if (args.size() > kMaxArgs) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "a launch has %d arguments, more than the maximum of %d", args.size(), kMaxArgs));
    }
    SubmitRecord* r;
    if (absl::Status s = next_slot(&r); !s.ok()) return s;
    r->op = static_cast<uint32_t>(op);
    launch_numbers_[r->tag % kUnansweredTags] = ++launches_;
    r->flags = (ndrange ? uint32_t{kHasNdrange} : 0u) |
               (ndrange && offsets ? uint32_t{kHasOffsets} : 0u) |
               (workgroup ? uint32_t{kHasWorkgroup} : 0u);
    r->kernel = kernel.handle;
    r->rank = ndrange ? static_cast<uint32_t>(ndrange->rank) : 0;
    for (int d = 0; ndrange && d < ndrange->rank; ++d) {
      r->extents[d] = (*ndrange)[d];
      r->offsets[d] = offsets && d < offsets->rank ? (*offsets)[d] : 0;
    }
    r->workgroup_rank = workgroup ? static_cast<uint32_t>(workgroup->rank) : 0;
    for (int d = 0; workgroup && d < workgroup->rank; ++d) r->workgroup[d] = (*workgroup)[d];
    r->nargs = static_cast<uint32_t>(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      ArgRecord& a = r->args[i];
      a.value = args[i].value();
      switch (args[i].kind()) {
        case Arg::Kind::kBuffer:
          a.kind = static_cast<uint8_t>(shm::v1::ArgKind::kBuffer);
          break;
        case Arg::Kind::kLocal:
          a.kind = static_cast<uint8_t>(shm::v1::ArgKind::kLocal);
          break;
        case Arg::Kind::kScalar:
          a.kind = static_cast<uint8_t>(shm::v1::ArgKind::kScalar);
          a.scalar = static_cast<uint8_t>(to_wire(args[i].scalar_type()));
          break;
      }
    }
    publish(/*answered=*/op != Op::kSubmit);
    return absl::OkStatus();
  }

  absl::Status wait(uint64_t event) override {
    SubmitRecord* r;
    if (absl::Status s = next_slot(&r); !s.ok()) return s;
    r->op = static_cast<uint32_t>(Op::kWait);
    r->event = event;
    publish(/*answered=*/true);
    return after_wait(answer());
  }

  absl::Status ping() override {
    SubmitRecord* r;
    if (absl::Status s = next_slot(&r); !s.ok()) return s;
    r->op = static_cast<uint32_t>(Op::kPing);
    publish(/*answered=*/true);
    return answer();
  }

  absl::Status write(const Buffer& buffer, uint64_t offset,
                     std::span<const std::byte> data) override {
    for (size_t done = 0; done < data.size() || (data.empty() && done == 0);) {
      const size_t n = std::min<size_t>(kArenaBytes, data.size() - done);
      std::memcpy(arena_, data.data() + done, n);
      if (absl::Status s = copy(Op::kCopyIn, buffer, offset + done, n); !s.ok()) return s;
      done += n;
      if (data.empty()) break;
    }
    return absl::OkStatus();
  }

  absl::Status read(const Buffer& buffer, uint64_t offset, std::span<std::byte> data) override {
    for (size_t done = 0; done < data.size();) {
      const size_t n = std::min<size_t>(kArenaBytes, data.size() - done);
      if (absl::Status s = copy(Op::kCopyOut, buffer, offset + done, n); !s.ok()) return s;
      std::memcpy(data.data() + done, arena_, n);
      done += n;
    }
    return absl::OkStatus();
  }

 private:
  ShmTransport() = default;

  // kad ended the channel (the header says so): why, as kad's last
  // message on the socket says, or the header while kad has not sent it yet.
  // (kad frees the header, reason and all, as soon as it reaps the channel.)
  absl::Status closed_error() {
    if (const std::optional<std::string>& told = last_message()) return ended_error(*told);
    return ended_error(absl::string_view(
        header_->close_reason,
        std::min<size_t>(header_->close_reason_length, sizeof(header_->close_reason))));
  }
  // kad hung up: why, where it said so on the socket before it did.
  absl::Status gone_error() {
    if (const std::optional<std::string>& told = last_message()) return ended_error(*told);
    return absl::UnavailableError(gone_);
  }
  static absl::Status ended_error(absl::string_view why) {
    return absl::UnavailableError(
        absl::StrCat("kad ended this queue's shared-memory channel: ", why));
  }
  // The reason in kad's last message on the socket, read once it came.
  const std::optional<std::string>& last_message() {
    Reply last{};
    int fd = -1;
    if (!told_ && shm::v1::receive_reply(socket_, &last, &fd, /*wait=*/false)) {
      if (fd >= 0) close(fd);  // none comes with it
      if (last.code != 0)
        told_.emplace(last.message, std::min<size_t>(last.message_length, sizeof(last.message)));
    }
    return told_;
  }
  // Whether to spin before sleeping, as kad says for the cores' sake.
  bool spin() const { return header_->sleep_at_once.load(std::memory_order_relaxed) == 0; }
  // Whether kad hung up, looking for up to `wait_ms`. (Not POLLIN: kad's
  // last message comes before its hang-up.)
  bool kad_gone(int wait_ms = 0) const {
    pollfd p{socket_, POLLRDHUP, 0};
    return poll(&p, 1, wait_ms) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
  }

  // A free submission slot. Failures of submitted launches are read first,
  // so that kad, which posts them, never waits for the completion ring
  // while the client waits for the submission ring: the submission ring
  // holds fewer records than the completion ring has slots.
  absl::Status next_slot(SubmitRecord** out) {
    RingIndices& ring = header_->submit;
    for (;;) {
      if (absl::Status s = read_failures(); !s.ok()) return s;
      if (header_->closed.load(std::memory_order_acquire)) return closed_error();
      // kad's head as last read will do while it leaves room: each read
      // of it is a cache line from kad's core.
      if (tail_ - submit_head_seen_ < kSubmitSlots) break;
      submit_head_seen_ = ring.head.load(std::memory_order_acquire);
      if (tail_ - submit_head_seen_ < kSubmitSlots) break;
      // Full: kad has a ring of records to get through. Sleep until a
      // quarter of it is free (kad wakes us then), never spin: 2000 launches
      // submitted back to back on 2 cores, a client that spun for each slot
      // took 57 % of the time, and the launches ran at 0.37x the driver's rate.
      // A quarter, not half: the three quarters left keep a worker busy
      // while this thread wakes, which took longer than half a ring of
      // launches (a worker that ran out spun 8 % of its time).
      if (!wait_until_reached(&ring.head, tail_ - kSubmitSlots * 3 / 4, &ring.producer_waiting,
                              &ring.producer_wake_at, 100'000'000) &&
          kad_gone())
        return gone_error();
    }
    SubmitRecord* r = &submit_slots_[tail_ % kSubmitSlots];
    std::memset(r, 0, offsetof(SubmitRecord, extents));
    r->tag = next_tag_++;
    *out = r;
    return absl::OkStatus();
  }

  // `answered`: kad answers the record (all but kSubmit), and answer() reads it next.
  void publish(bool answered) {
    if (answered) awaited_ = next_tag_ - 1;  // next_slot gave it the newest tag
    ++tail_;
    header_->submit.tail.store(tail_, std::memory_order_release);
    notify(&header_->submit.tail, &header_->submit.consumer_waiting);
  }

  // Reads the completions that have arrived, without waiting: with no
  // answered record outstanding, each is a submitted launch's failure.
  absl::Status read_failures() {
    while (header_->completion.tail.load(std::memory_order_acquire) != head_) {
      if (absl::Status s = read_one(); !s.ok()) return s;
      if (absl::Status s = note_failure(); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // done_ is a submitted launch's answer: kad answers those only when they
  // fail; the next wait or run reports the first, naming the launch.
  absl::Status note_failure() {
    if (done_.code == 0) {
      return absl::InternalError(
          absl::StrFormat("kad answered record %d, a submitted launch, with success", done_.tag));
    }
    defer(
        static_cast<absl::StatusCode>(done_.code),
        absl::StrFormat(
            "launch %d submitted on this queue: %s", launch_numbers_[done_.tag % kUnansweredTags],
            absl::string_view(done_.message, std::min<size_t>(done_.message_length, kMaxMessage))));
    return absl::OkStatus();
  }

  // Reads the next completion into done_.
  absl::Status read_one() {
    RingIndices& ring = header_->completion;
    for (;;) {
      const uint32_t tail = ring.tail.load(std::memory_order_acquire);
      if (tail != head_) break;
      if (header_->closed.load(std::memory_order_acquire)) return closed_error();
      if (wait_for_change(&ring.tail, tail, &ring.consumer_waiting, 100'000'000,
                          spin() && launches_ - launches_when_answered_ <= kSpinAhead) == tail &&
          kad_gone())
        return gone_error();
    }
    if (const uint32_t tail = ring.tail.load(std::memory_order_acquire);
        tail - head_ > kCompletionSlots) {
      // Indices no ring has: kad freed the channel's memory, zeros now
      // (it reaped the channel, and hangs up next).
      if (kad_gone(1000)) return gone_error();
      return absl::InternalError(
          absl::StrFormat("kad's completion ring says %d answers are ready of %d slots",
                          tail - head_, kCompletionSlots));
    }
    // The record's fields, then only the message bytes it says are its own
    // (most answers have none): its other cache lines stay kad's.
    const CompletionRecord& slot = completion_slots_[head_ % kCompletionSlots];
    std::memcpy(&done_, &slot, offsetof(CompletionRecord, message));
    std::memcpy(done_.message, slot.message, std::min<size_t>(done_.message_length, kMaxMessage));
    ++head_;
    // Answers come in submission order, each once, none past the awaited
    // record's (a submitted launch's success leaves a gap).
    const uint64_t last = awaited_ != 0 ? awaited_ : next_tag_ - 1;
    if (done_.tag < next_answer_ || done_.tag > last) {
      return absl::InternalError(
          absl::StrFormat("kad answered record %d where a record from %d to %d was due", done_.tag,
                          next_answer_, last));
    }
    next_answer_ = done_.tag + 1;
    ring.head.store(head_, std::memory_order_release);
    notify(&ring.head, &ring.producer_waiting);
    return absl::OkStatus();
  }

  absl::Status status_of(const CompletionRecord& c) const {
    if (c.code == 0) return absl::OkStatus();
    return absl::Status(static_cast<absl::StatusCode>(c.code),
                        std::string(c.message, std::min<size_t>(c.message_length, kMaxMessage)));
  }

  // Reads answers up to and including the awaited record's.
  absl::Status answer() {
    for (;;) {
      if (absl::Status s = read_one(); !s.ok()) return s;
      if (done_.tag == awaited_) break;
      if (absl::Status s = note_failure(); !s.ok()) return s;
    }
    awaited_ = 0;
    launches_when_answered_ = launches_;
    return status_of(done_);
  }

  absl::Status copy(Op op, const Buffer& buffer, uint64_t offset, uint64_t size) {
    SubmitRecord* r;
    if (absl::Status s = next_slot(&r); !s.ok()) return s;
    r->op = static_cast<uint32_t>(op);
    r->buffer = buffer.handle;
    r->offset = offset;
    r->size = size;
    r->arena_offset = 0;
    publish(/*answered=*/true);
    return answer();
  }

  int socket_ = -1;
  std::string gone_;                 // the error once kad has gone: names the session
  std::optional<std::string> told_;  // why kad ended the channel, as its last message said
  uint8_t* memory_ = nullptr;
  uint64_t bytes_ = 0;
  ChannelHeader* header_ = nullptr;
  SubmitRecord* submit_slots_ = nullptr;
  const CompletionRecord* completion_slots_ = nullptr;
  uint8_t* arena_ = nullptr;
  uint32_t tail_ = 0;              // submission records published
  uint32_t submit_head_seen_ = 0;  // kad's submission head as last read
  uint32_t head_ = 0;              // completion records consumed
  uint64_t next_tag_ = 1;
  uint64_t next_answer_ = 1;  // the lowest tag the next completion may carry
  uint64_t awaited_ = 0;      // the answered record outstanding (0: none)
  // Launches submitted on this queue; each record's number among them, by
  // tag, while its answer may still come: a record is in the submission
  // ring, then its answer in the completion ring (kad waits for room there).
  static constexpr uint64_t kUnansweredTags = 2 * (kSubmitSlots + kCompletionSlots);
  uint64_t launches_ = 0;
  // launches_ when the last answered record was answered: the launches
  // since then may be ahead of the next answer on the device. With more
  // than kSpinAhead of them, a wait sleeps at once: the answer is that many
  // launches away, and a spinning client takes a core from kad and the
  // driver while they run them (200 launches then a wait on 2 cores: the
  // client's spin was 18 % of all samples).
  static constexpr uint64_t kSpinAhead = 4;
  uint64_t launches_when_answered_ = 0;
  std::array<uint64_t, kUnansweredTags> launch_numbers_{};
  CompletionRecord done_{};
};

}  // namespace

absl::StatusOr<Connection::Mapping> map_shared_buffer(const Connection& c, uint64_t buffer) {
  const int socket = connect_side_socket(c.unix_path + ".shm");
  if (socket < 0) return absl::UnavailableError("kad offers no shared memory");
  MapBuffer request{};
  request.request = static_cast<uint32_t>(Request::kMapBuffer);
  request.version = kVersion;
  std::memcpy(request.session_id, c.session_id.data(),
              std::min(c.session_id.size(), sizeof(request.session_id)));
  request.buffer = buffer;
  absl::StatusOr<std::pair<Reply, int>> answer =
      send(socket, &request, sizeof(request), MSG_NOSIGNAL) == sizeof(request)
          ? receive_reply(socket)
          : absl::UnavailableError("cannot ask kad to map a buffer");
  close(socket);
  if (!answer.ok()) return answer.status();
  const auto [reply, fd] = *answer;
  void* p = mmap(nullptr, reply.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return absl::InternalError("cannot map the buffer kad shared");
  return Connection::Mapping{static_cast<std::byte*>(p), reply.bytes};
}

absl::StatusOr<std::unique_ptr<Queue::Transport>> make_shm_transport(
    std::shared_ptr<Connection> connection, uint64_t queue) {
  auto t = ShmTransport::open(*connection, queue);
  if (!t.ok()) return t.status();
  return std::unique_ptr<Queue::Transport>(std::move(*t));
}

}  // namespace kad::client
