// A transfer (a WriteBuffer or ReadBuffer call) holds a thread of kad's for
// as long as its client keeps it open, sending nothing or a chunk an hour:
// a session holds at most --max-transfers-per-session of them, one more is
// refused naming the limit, and they end when their session closes, so
// that a client cannot pile up threads by closing sessions under them.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/wire_session.h"

namespace kad {
namespace {

using ::testing::HasSubstr;
using testing::WireSession;

// A write that sent its first chunk and then nothing more.
struct OpenWrite {
  grpc::ClientContext context;
  v1::WriteBufferResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::WriteBufferChunk>> writer;
};

TEST(TransferCalls, AreBoundedPerSessionAndEndWithTheirSession) {
  auto d = testing::Daemon::start({"--max-transfers-per-session", "3"});
  ASSERT_TRUE(d.ok()) << d.status();
  WireSession s((*d)->tcp_uri(), "idle-transfers");
  const uint64_t queue = s.create_queue();
  const uint64_t marker = s.allocate(16);  // the last write announces bytes 8 to 16

  // Three writes, each of 4 of the 8 bytes it announces at offset 4 * i:
  // kad has taken each in once its bytes are in the buffer.
  std::vector<std::unique_ptr<OpenWrite>> writes;
  for (int i = 0; i < 3; ++i) {
    auto w = std::make_unique<OpenWrite>();
    s.prepare(w->context);
    w->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    w->writer = s.stub().WriteBuffer(&w->context, &w->response);
    v1::WriteBufferChunk chunk;
    chunk.set_queue(queue);
    chunk.set_buffer(marker);
    chunk.set_offset(4 * i);
    chunk.set_size(8);
    chunk.set_data(std::string(4, static_cast<char>(i + 1)));
    ASSERT_TRUE(w->writer->Write(chunk));
    writes.push_back(std::move(w));
  }
  const std::string all_in = std::string(4, '\1') + std::string(4, '\2') + std::string(4, '\3');
  {
    WireSession::Stream look(s);
    v1::QueueCommand read;
    read.set_queue(queue);
    read.mutable_copy_out()->set_buffer(marker);
    read.mutable_copy_out()->set_size(12);
    std::string seen;
    for (const absl::Time give_up = absl::Now() + absl::Seconds(30);
         seen != all_in && absl::Now() < give_up;) {
      seen = look.send(read).data();
      if (seen != all_in) absl::SleepFor(absl::Milliseconds(10));
    }
    ASSERT_EQ(seen, all_in) << "kad did not take the three writes in";
  }

  // A fourth transfer, a read, is refused naming the limit.
  {
    grpc::ClientContext context;
    s.prepare(context);
    v1::ReadBufferRequest request;
    request.set_queue(queue);
    request.set_buffer(marker);
    request.set_size(12);
    auto reader = s.stub().ReadBuffer(&context, request);
    v1::BufferChunk chunk;
    EXPECT_FALSE(reader->Read(&chunk)) << "a fourth transfer was served";
    const grpc::Status refused = reader->Finish();
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(refused.error_message(),
                HasSubstr("the session already has 3 transfers (WriteBuffer, ReadBuffer) open, its "
                          "maximum (--max-transfers-per-session)"));
  }
  testing::expect_bystander_served((*d)->tcp_uri());

  // The session closes: its transfers end with it, long before their
  // deadlines, though their client neither finishes nor cancels them.
  const absl::Time closed = absl::Now();
  s.close();
  for (auto& w : writes) {
    const grpc::Status ended = w->writer->Finish();
    EXPECT_FALSE(ended.ok());
    EXPECT_NE(ended.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << ended.error_message();
  }
  EXPECT_LT(absl::Now() - closed, absl::Seconds(20));
  testing::expect_bystander_served((*d)->tcp_uri());
}

}  // namespace
}  // namespace kad
