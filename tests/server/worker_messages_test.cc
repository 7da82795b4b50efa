// Messages from kad to a session's worker that sleeps on its launch ring
// (server/worker/launch_ring.h): the worker reads its socket only when
// kad's count says a message is owed, so every message is counted, and
// counted before its bytes go.
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/module.h"
#include "core/specialization.h"
#include "gtest/gtest.h"
#include "server/worker/worker_codec.h"
#include "server/worker/worker_pool.h"
#include "tests/support/pocl.h"

namespace kad::server::worker {
namespace {

// A message larger than the socket's buffer blocks kad's send until the
// worker reads. Counted only after the send, it would wait for the
// worker's periodic look at its socket (5 s); counted first, the worker
// reads it as it comes.
TEST(WorkerMessages, AMessageLargerThanTheSocketsBufferReachesASleepingWorkerAtOnce) {
  WorkerPool pool({.command = {KAD_DAEMON_PATH, {}}, .spares = 1});
  const std::string device = testing::pocl_device().info().id;
  pool.keep_ready(device);
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (pool.stats().ready == 0 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_EQ(pool.stats().ready, 1u);
  absl::StatusOr<std::unique_ptr<WorkerProcess>> w = pool.take(device);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_NE((*w)->launch_ring(), nullptr) << "a spare has its launch ring";
  absl::SleepFor(absl::Milliseconds(200));  // asleep on its ring by now

  // 8 MiB of a module in a format no device knows: the worker reads all of
  // it, and answers at once that it cannot load it.
  wire::Compile m;
  m.set_format(9999);
  m.set_module(std::string(8 << 20, 'x'));
  const std::string request = m.SerializeAsString();
  const IdRecord id{1};
  const absl::Time sent = absl::Now();
  ASSERT_TRUE((*w)->send(Op::kLoadKernel, bytes_of(id), std::as_bytes(std::span(request))).ok());
  Header header;
  std::span<const std::byte> payload;
  ASSERT_TRUE((*w)->reader()
                  .next(&header, &payload, nullptr, sent + absl::Seconds(30), kMaxReplyBytes)
                  .ok());
  EXPECT_EQ(header.op, static_cast<uint32_t>(Op::kStatus));
  StatusRecord status;
  ASSERT_GE(payload.size(), sizeof status);
  std::memcpy(&status, payload.data(), sizeof status);
  EXPECT_NE(status.code, 0) << "a module in format 9999 loaded";
  // Far under the worker's 5 s look: the message was read as it came.
  EXPECT_LT(absl::Now() - sent, absl::Seconds(3))
      << "the worker read the message only at its periodic look at its socket";
  EXPECT_TRUE((*w)->launch_ring()->check_messages_read().ok());
}

// The pool keeps no kernel alive: one that kad's cache dropped and no
// session holds is not preloaded (and its program binary, charged to kad's
// host-memory guard, is freed). Were it kept, this unparsable request
// would end the spare that loaded it.
TEST(WorkerMessages, AKernelNobodyHoldsAnyMoreIsNotPreloaded) {
  WorkerPool pool({.command = {KAD_DAEMON_PATH, {}}, .spares = 1});
  const std::string device = testing::pocl_device().info().id;
  pool.remember(device, "", 7, std::make_shared<const std::string>("not a compile request"));
  pool.keep_ready(device);
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (pool.stats().ready == 0 && pool.stats().failed_starts == 0 && absl::Now() < give_up)
    absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(pool.stats().ready, 1u);
  EXPECT_EQ(pool.stats().ready_preloaded, 0u);
  EXPECT_EQ(pool.stats().failed_starts, 0u) << "the spare loaded a kernel nobody holds";
}

// A spare that fails while loading the device's recent kernels (here: a
// request it cannot parse, which ends it) is stopped, never given to a
// session: it could owe an answer that the session's first request would
// read as its own. The kernel it failed on is preloaded no more, so the
// next spare starts and serves.
TEST(WorkerMessages, ASpareThatFailsLoadingARecentKernelIsStoppedAndTheNextOneServes) {
  WorkerPool pool({.command = {KAD_DAEMON_PATH, {}}, .spares = 1});
  const std::string device = testing::pocl_device().info().id;
  // Held here, as a session's kernel holds its request: the pool does not.
  const auto unparsable = std::make_shared<const std::string>("not a compile request");
  pool.remember(device, "", 7, unparsable);
  pool.keep_ready(device);
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while ((pool.stats().failed_starts == 0 || pool.stats().ready == 0) && absl::Now() < give_up)
    absl::SleepFor(absl::Milliseconds(20));
  ASSERT_EQ(pool.stats().failed_starts, 1u);
  ASSERT_EQ(pool.stats().ready, 1u) << "no spare after the one that failed";

  absl::StatusOr<std::unique_ptr<WorkerProcess>> w = pool.take(device);
  ASSERT_TRUE(w.ok()) << w.status();
  wire::Compile m;
  m.set_format(9999);
  const std::string request = m.SerializeAsString();
  const IdRecord id{1};
  ASSERT_TRUE((*w)->send(Op::kLoadKernel, bytes_of(id), std::as_bytes(std::span(request))).ok());
  Header header;
  std::span<const std::byte> payload;
  const absl::Status got = (*w)->reader().next(&header, &payload, nullptr,
                                               absl::Now() + absl::Seconds(30), kMaxReplyBytes);
  ASSERT_TRUE(got.ok()) << got;
  StatusRecord status;
  ASSERT_EQ(header.op, static_cast<uint32_t>(Op::kStatus));
  ASSERT_GE(payload.size(), sizeof status);
  std::memcpy(&status, payload.data(), sizeof status);
  EXPECT_NE(status.code, 0) << "the answer to this request, not another";
  EXPECT_EQ(pool.stats().failed_starts, 1u) << "spares kept failing on the same kernel";
}

// What a worker says is a worker's to size, and a worker a kernel took
// over may say anything: kad keeps (a failed compile is remembered per key)
// and passes on at most 64 KiB of a message, and no parameter text longer
// than 1 KiB.
TEST(WorkerMessages, AWorkersLongWordsAreCutAndItsParameterTextsBounded) {
  wire::CompileReply failed;
  failed.set_code(static_cast<int32_t>(absl::StatusCode::kInvalidArgument));
  failed.set_message(std::string(1 << 20, 'x'));
  const absl::Status cut = from_reply(failed).status();
  EXPECT_EQ(cut.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cut.message(), absl::StrCat(std::string(kMaxWorkerMessageBytes, 'x'), "... (",
                                        (1 << 20) - kMaxWorkerMessageBytes, " bytes more)"));
  EXPECT_EQ(bounded_message("short"), "short");

  wire::CompileReply built;
  built.set_max_workgroup_size(256);
  built.set_preferred_multiple(8);
  built.set_has_parameters(true);
  wire::KernelParameter* p = built.add_parameters();
  p->set_type("int*");
  p->set_name("out");
  EXPECT_TRUE(from_reply(built).ok());
  p->set_type(std::string(kMaxParameterTextBytes + 1, 't'));
  EXPECT_EQ(from_reply(built).status().code(), absl::StatusCode::kInternal);
}

// DESIGN §8: a worker reads no cache of kad's, where every tenant's code
// lies; it builds the code kad lowered and sent with the compile request.
// Shown by sending, under the request's own cache key, code that is not
// SPIR: the compile worker builds what it was sent, and fails; sent the
// code kad lowered, it builds the kernel.
TEST(WorkerMessages, ACompileWorkerBuildsTheCodeKadSentWithTheRequest) {
  WorkerPool pool({.command = {KAD_DAEMON_PATH, {}}, .spares = 0});
  Device& pocl = testing::pocl_device();
  const int salt = static_cast<int>((getpid() ^ time(nullptr)) & 0xffff);
  absl::StatusOr<testing::SourceCompile> compile =
      testing::source_compile(pocl,
                              absl::StrCat("kernel void sent(KAD_CONTEXT, global int* out) {\n"
                                           "  if (kad_active()) out[kad_global_linear()] = ",
                                           salt, ";\n}\n"),
                              "sent");
  ASSERT_TRUE(compile.ok()) << compile.status();
  const CompileRequest request = compile->request();
  const SpecializationKey& key = compile->key;
  absl::StatusOr<std::vector<LoweredCode>> lowered = pocl.lower_ahead(request);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  ASSERT_EQ(lowered->size(), 1u) << "PoCL takes SPIR that kad lowers";

  // The reply of a fresh compile worker to `request` sent with `code`.
  auto compile_with = [&](const std::string& code) -> wire::CompileReply {
    wire::Compile message = to_message(request);
    wire::LoweredCode* sent = message.add_lowered();
    sent->set_key((*lowered)[0].key);
    sent->set_code(code);
    const std::string bytes = message.SerializeAsString();
    absl::StatusOr<std::unique_ptr<WorkerProcess>> w = pool.start_compile_worker(key.device_id);
    EXPECT_TRUE(w.ok()) << w.status();
    if (!w.ok()) return {};
    const IdRecord id{1};
    EXPECT_TRUE((*w)->send(Op::kCompile, bytes_of(id), std::as_bytes(std::span(bytes))).ok());
    Header header;
    std::span<const std::byte> payload;
    const absl::Status got = (*w)->reader().next(
        &header, &payload, nullptr, absl::Now() + absl::Seconds(60), kMaxCompileReplyBytes);
    EXPECT_TRUE(got.ok()) << got;
    wire::CompileReply reply;
    if (got.ok()) reply.ParseFromArray(payload.data(), static_cast<int>(payload.size()));
    return reply;
  };
  const wire::CompileReply garbage = compile_with("this is not SPIR");
  EXPECT_NE(garbage.code(), 0) << "the worker built code other than what kad sent";
  const wire::CompileReply built = compile_with((*lowered)[0].code);
  EXPECT_EQ(built.code(), 0) << built.message();
  EXPECT_FALSE(built.program_binary().empty());
}

}  // namespace
}  // namespace kad::server::worker
