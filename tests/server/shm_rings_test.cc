// ChannelRings and CompletionBuilder (server/shm_rings.h): the serving side
// of a shared-memory channel, on a channel's real memory (a sealed memfd)
// with this test as the client, writing the indices and slots a client
// writes — and the ones a hostile client would.
#include "server/shm_rings.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "kad/shm/v1/ring.h"
#include "server/sealed_memfd.h"

namespace kad::server {
namespace {

using namespace shm::v1;

class ShmRings : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<SharedMapping> m = SharedMapping::create("shm-rings-test", kChannelBytes);
    ASSERT_TRUE(m.ok()) << m.status();
    mapping_.emplace(*std::move(m));
    ChannelRings::format(memory());
  }
  void* memory() const { return mapping_->data(); }
  ChannelHeader& header() const { return *static_cast<ChannelHeader*>(memory()); }
  SubmitRecord* submit_slots() const {
    return reinterpret_cast<SubmitRecord*>(static_cast<uint8_t*>(memory()) + kSubmitOffset);
  }
  CompletionRecord* completion_slots() const {
    return reinterpret_cast<CompletionRecord*>(static_cast<uint8_t*>(memory()) + kCompletionOffset);
  }
  // The client's side: a ping record tagged `tag` in the next slot.
  void submit(uint64_t tag) {
    const uint32_t tail = header().submit.tail.load();
    SubmitRecord& r = submit_slots()[tail % kSubmitSlots];
    std::memset(&r, 0, sizeof(r));
    r.op = static_cast<uint32_t>(Op::kPing);
    r.tag = tag;
    header().submit.tail.store(tail + 1);
  }
  static CompletionRecord answer(uint64_t tag) {
    CompletionRecord c{};
    c.tag = tag;
    return c;
  }
  static bool never() { return false; }

  std::optional<SharedMapping> mapping_;
};

TEST_F(ShmRings, FormatWritesTheLayoutAClientChecks) {
  EXPECT_EQ(header().magic, kMagic);
  EXPECT_EQ(header().version, kVersion);
  EXPECT_EQ(header().submit_slots, kSubmitSlots);
  EXPECT_EQ(header().completion_slots, kCompletionSlots);
  EXPECT_EQ(header().arena_offset, kArenaOffset);
  EXPECT_EQ(header().total_bytes, kChannelBytes);
}

TEST_F(ShmRings, RecordsComeInOrderAndFreeTheirSlots) {
  ChannelRings rings(memory());
  for (uint64_t tag = 1; tag <= 3; ++tag) submit(tag);
  absl::StatusOr<uint32_t> waiting = rings.wait_for_records(0, /*spin=*/false);
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  ASSERT_EQ(*waiting, 3u);
  SubmitRecord r{};
  for (uint64_t tag = 1; tag <= 3; ++tag) {
    rings.take(&r);
    EXPECT_EQ(r.tag, tag);
    EXPECT_EQ(header().submit.head.load(), tag);  // the slot is the client's again
  }
  EXPECT_EQ(rings.positions().submit_head, 3u);
}

TEST_F(ShmRings, ARecordTakenIsAPrivateCopy) {
  ChannelRings rings(memory());
  submit(7);
  ASSERT_EQ(*rings.wait_for_records(0, false), 1u);
  SubmitRecord r{};
  rings.take(&r);
  submit_slots()[0].tag = 99;  // the client writes the slot again
  EXPECT_EQ(r.tag, 7u);
}

// Only what a record uses is copied: its fields and its `nargs` arguments.
// A hostile count copies every argument slot there is, and stays what the
// client wrote, for the decoder to refuse.
TEST_F(ShmRings, APeekCopiesTheArgumentsTheRecordCountsAndItsOtherFields) {
  ChannelRings rings(memory());
  for (uint32_t nargs : {2u, 1000u}) {
    submit(nargs);
    SubmitRecord& slot = submit_slots()[nargs == 2 ? 0 : 1];
    slot.nargs = nargs;
    for (uint32_t i = 0; i < kMaxArgs; ++i) slot.args[i].value = 100 + i;
    slot.event = 7;
    slot.arena_offset = 4096;
    SubmitRecord r{};
    r.args[2].value = 55;
    r.args[kMaxArgs - 1].value = 66;
    rings.take(&r);
    EXPECT_EQ(r.tag, nargs);
    EXPECT_EQ(r.nargs, nargs);
    EXPECT_EQ(r.args[0].value, 100u);
    EXPECT_EQ(r.args[1].value, 101u);
    EXPECT_EQ(r.args[2].value, nargs == 2 ? 55u : 102u);
    EXPECT_EQ(r.args[kMaxArgs - 1].value, nargs == 2 ? 66u : 100u + kMaxArgs - 1);
    EXPECT_EQ(r.event, 7u);
    EXPECT_EQ(r.arena_offset, 4096u);
  }
}

TEST_F(ShmRings, NoRecordWithinTheWaitIsNone) {
  ChannelRings rings(memory());
  absl::StatusOr<uint32_t> waiting = rings.wait_for_records(1'000'000, /*spin=*/false);
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(*waiting, 0u);
}

TEST_F(ShmRings, ATailMoreThanARingAheadEndsTheChannelNamingBothIndices) {
  ChannelRings rings(memory());
  header().submit.tail.store(kSubmitSlots + 1);
  absl::StatusOr<uint32_t> waiting = rings.wait_for_records(0, false);
  ASSERT_FALSE(waiting.ok());
  EXPECT_EQ(waiting.status().message(), "submission ring indices out of range (head 0, tail 257)");
  // And a tail behind the head is as far out.
  header().submit.tail.store(0xffffffffu);
  EXPECT_FALSE(rings.wait_for_records(0, false).ok());
}

TEST_F(ShmRings, CompletionsGoToTheClientInOrder) {
  ChannelRings rings(memory());
  for (uint64_t tag = 1; tag <= 3; ++tag)
    ASSERT_TRUE(rings.post(answer(tag), absl::Seconds(1), false, never).ok());
  EXPECT_EQ(header().completion.tail.load(), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(completion_slots()[i].tag, i + 1);
  EXPECT_EQ(rings.positions().completion_tail, 3u);
}

// An answer writes its fields and its own message bytes: the length tells
// the client where they end, whatever an earlier answer left in the slot.
TEST_F(ShmRings, AnAnswerWritesItsFieldsAndItsMessageOnly) {
  ChannelRings rings(memory());
  CompletionBuilder b;
  b.start(1);
  b.finish(absl::NotFoundError("buffer 9 is not in this session"));
  ASSERT_TRUE(rings.post(b.record(), absl::Seconds(1), false, never).ok());
  EXPECT_EQ(std::string(completion_slots()[0].message, completion_slots()[0].message_length),
            "buffer 9 is not in this session");
  completion_slots()[1].message[0] = 'x';
  b.start(2);
  b.finish(absl::OkStatus());
  ASSERT_TRUE(rings.post(b.record(), absl::Seconds(1), false, never).ok());
  EXPECT_EQ(completion_slots()[1].tag, 2u);
  EXPECT_EQ(completion_slots()[1].code, 0);
  EXPECT_EQ(completion_slots()[1].message_length, 0u);
  EXPECT_EQ(completion_slots()[1].message[0], 'x');  // not the answer's: no byte of it is read
}

TEST_F(ShmRings, AFullRingUnreadPastTheStallTimeoutEndsTheChannel) {
  ChannelRings rings(memory());
  for (uint32_t i = 0; i < kCompletionSlots; ++i)
    ASSERT_TRUE(rings.post(answer(i), absl::Seconds(1), false, never).ok());
  absl::Status posted = rings.post(answer(0), absl::Milliseconds(20), false, never);
  EXPECT_EQ(posted.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(posted.message(), "the client read no completion for 20 ms with the ring full");
  EXPECT_EQ(header().completion.tail.load(), kCompletionSlots);  // nothing overwritten
}

TEST_F(ShmRings, AFullRingGivesUpWhenAskedTo) {
  ChannelRings rings(memory());
  for (uint32_t i = 0; i < kCompletionSlots; ++i)
    ASSERT_TRUE(rings.post(answer(i), absl::Seconds(1), false, never).ok());
  absl::Status posted = rings.post(answer(0), absl::Seconds(30), false, [] { return true; });
  EXPECT_EQ(posted.code(), absl::StatusCode::kCancelled);
}

TEST_F(ShmRings, AClientHeadPastTheTailEndsTheChannel) {
  ChannelRings rings(memory());
  // The server reads the client's head when the one it saw last leaves no
  // room: after a ring of answers here.
  for (uint32_t i = 0; i < kCompletionSlots; ++i)
    ASSERT_TRUE(rings.post(answer(i), absl::Seconds(1), false, never).ok());
  // Read four completions never posted.
  header().completion.head.store(kCompletionSlots + 4);
  absl::Status posted = rings.post(answer(2), absl::Seconds(1), false, never);
  EXPECT_EQ(posted.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(posted.message(), "completion ring indices out of range (head 260, tail 256)");
}

TEST_F(ShmRings, TheClientsCompletionHeadIsReadOnlyWhenTheOneSeenLeavesNoRoom) {
  ChannelRings rings(memory());
  ASSERT_TRUE(rings.post(answer(0), absl::Seconds(1), false, never).ok());  // reads head 0
  // A head the server does not read while it has room by the one it saw
  // (each read is a cache line from the client's core): this one would
  // end the channel.
  header().completion.head.store(5000);
  for (uint32_t i = 1; i < kCompletionSlots; ++i)
    ASSERT_TRUE(rings.post(answer(i), absl::Seconds(1), false, never).ok()) << i;
  // Full by the head seen: read again, and out of range.
  EXPECT_FALSE(rings.completion_room());
  absl::Status posted = rings.post(answer(0), absl::Seconds(1), false, never);
  EXPECT_EQ(posted.code(), absl::StatusCode::kOutOfRange);
}

TEST_F(ShmRings, TheServerGoesOnFromThePositionsHandedToIt) {
  ChannelRings first(memory());
  for (uint64_t tag = 1; tag <= 3; ++tag) submit(tag);
  ASSERT_EQ(*first.wait_for_records(0, false), 3u);
  SubmitRecord r{};
  first.take(&r);
  ASSERT_TRUE(first.post(answer(r.tag), absl::Seconds(1), false, never).ok());
  // Another server (the session's worker, say) takes the rings over.
  ChannelRings second(memory(), first.positions());
  absl::StatusOr<uint32_t> waiting = second.wait_for_records(0, false);
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(*waiting, 2u);
  second.take(&r);
  EXPECT_EQ(r.tag, 2u);
  ASSERT_TRUE(second.post(answer(r.tag), absl::Seconds(1), false, never).ok());
  EXPECT_EQ(completion_slots()[0].tag, 1u);
  EXPECT_EQ(completion_slots()[1].tag, 2u);
  EXPECT_EQ(header().completion.tail.load(), 2u);
}

TEST_F(ShmRings, APeekedRecordStaysForWhoeverServesNext) {
  ChannelRings worker(memory());
  submit(5);
  absl::StatusOr<uint32_t> waiting = worker.records_waiting();
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  ASSERT_EQ(*waiting, 1u);
  SubmitRecord r{};
  worker.peek(&r);  // one it cannot serve: left where it is
  EXPECT_EQ(r.tag, 5u);
  EXPECT_EQ(header().submit.head.load(), 0u);
  ChannelRings kad(memory(), worker.positions());
  ASSERT_EQ(*kad.records_waiting(), 1u);
  kad.take(&r);
  EXPECT_EQ(r.tag, 5u);
  EXPECT_EQ(header().submit.head.load(), 1u);
}

TEST_F(ShmRings, CompletionRoomSaysWhetherAPostWouldWait) {
  ChannelRings rings(memory());
  for (uint32_t i = 0; i + 1 < kCompletionSlots; ++i)
    ASSERT_TRUE(rings.post(answer(i), absl::Seconds(1), false, never).ok());
  EXPECT_TRUE(rings.completion_room());
  ASSERT_TRUE(rings.post(answer(0), absl::Seconds(1), false, never).ok());
  EXPECT_FALSE(rings.completion_room());
  header().completion.head.store(1);  // the client read one
  EXPECT_TRUE(rings.completion_room());
  ASSERT_TRUE(rings.post(answer(0), absl::Seconds(1), false, never).ok());
  EXPECT_FALSE(rings.completion_room());
  header().completion.head.store(kCompletionSlots + 7);  // past the tail: no room to trust
  EXPECT_FALSE(rings.completion_room());
}

TEST_F(ShmRings, EndingTellsTheClientWhyCutToTheRoomThere) {
  ChannelRings rings(memory());
  rings.end(std::string(400, 'x'));
  EXPECT_EQ(header().closed.load(), 1u);
  EXPECT_EQ(header().close_reason_length, sizeof(header().close_reason));
  EXPECT_EQ(std::string(header().close_reason, 3), "xxx");
}

TEST_F(ShmRings, SleepAtOnceIsWhatTheServerLastSaid) {
  ChannelRings rings(memory());
  rings.set_sleep_at_once(true);
  EXPECT_EQ(header().sleep_at_once.load(), 1u);
  rings.set_sleep_at_once(false);
  EXPECT_EQ(header().sleep_at_once.load(), 0u);
}

TEST_F(ShmRings, AClientWaitingForRoomIsWokenOnceWhenItsTargetIsReached) {
  ChannelRings rings(memory());
  for (uint64_t tag = 1; tag <= 4; ++tag) submit(tag);
  RingIndices& ring = header().submit;
  // The client sleeps until the head reaches 3, as next_slot does.
  ring.producer_wake_at.store(3);
  ring.producer_waiting.store(1);
  ASSERT_EQ(*rings.wait_for_records(0, false), 4u);
  SubmitRecord r{};
  rings.take(&r);
  rings.take(&r);
  EXPECT_EQ(ring.producer_waiting.load(), 1u);  // head 2: not yet
  rings.take(&r);
  // Woken at 3, and the flag lowered by the waker: the records taken
  // before the client runs again cost no wake-up each.
  EXPECT_EQ(ring.producer_waiting.load(), 0u);
  rings.take(&r);
  EXPECT_EQ(ring.producer_waiting.load(), 0u);
  EXPECT_EQ(ring.head.load(), 4u);
}

TEST_F(ShmRings, AClientThatFillsTheRingAgainAndAgainIsWokenEachTimeItWaits) {
  ChannelRings rings(memory());
  constexpr uint64_t kRecords = 16 * kSubmitSlots;
  std::atomic<int> sleeps{0}, timeouts{0};
  std::thread client([&] {
    RingIndices& ring = header().submit;
    for (uint64_t tag = 1; tag <= kRecords; ++tag) {
      // Full: sleep until a quarter of the ring is free (next_slot's rule).
      while (ring.tail.load() - ring.head.load() >= kSubmitSlots) {
        ++sleeps;
        if (!wait_until_reached(&ring.head, ring.tail.load() - kSubmitSlots * 3 / 4,
                                &ring.producer_waiting, &ring.producer_wake_at, 5'000'000'000))
          ++timeouts;
      }
      submit(tag);
    }
  });
  // The server: pauses now and then, so that the client fills the ring.
  SubmitRecord r{};
  for (uint64_t want = 1; want <= kRecords;) {
    absl::StatusOr<uint32_t> waiting = rings.wait_for_records(1'000'000, false);
    ASSERT_TRUE(waiting.ok()) << waiting.status();
    for (uint32_t i = 0; i < *waiting; ++i, ++want) {
      rings.take(&r);
      ASSERT_EQ(r.tag, want);
      if (want % 97 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  client.join();
  EXPECT_GT(sleeps.load(), 0);
  EXPECT_EQ(timeouts.load(), 0);
}

TEST(CompletionBuilder, NoByteOfAnEarlierCompletionReachesALaterOne) {
  CompletionBuilder b;
  CompletionRecord& first = b.start(1);
  first.event = 42;
  first.workgroup[0] = 256;
  b.finish(absl::NotFoundError(std::string(600, 'm')));
  EXPECT_EQ(b.record().code, static_cast<int32_t>(absl::StatusCode::kNotFound));
  EXPECT_EQ(b.record().message_length, kMaxMessage);  // cut to the room

  b.start(2);
  b.finish(absl::InvalidArgumentError("short"));
  EXPECT_EQ(b.record().tag, 2u);
  EXPECT_EQ(b.record().event, 0u);
  EXPECT_EQ(b.record().workgroup[0], 0);
  EXPECT_EQ(std::string(b.record().message, b.record().message_length), "short");
  for (size_t i = 5; i < kMaxMessage; ++i) ASSERT_EQ(b.record().message[i], 0) << i;

  b.start(3);
  b.finish(absl::OkStatus());
  EXPECT_EQ(b.record().code, 0);
  EXPECT_EQ(b.record().message_length, 0u);
  for (size_t i = 0; i < kMaxMessage; ++i) ASSERT_EQ(b.record().message[i], 0) << i;
}

}  // namespace
}  // namespace kad::server
