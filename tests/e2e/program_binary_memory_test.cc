// DESIGN §8, kad's own memory. A program binary is what kad keeps of a
// compiled kernel, to load into every session's worker, and a client can
// make one of tens of MiB in a fraction of a second (a large constant
// array). kad keeps binaries within its host-memory guard (--max-host-memory):
// past it, the launch that needed the compile fails RESOURCE_EXHAUSTED naming
// the guard, other sessions' launches go on with correct results, and once
// the client has gone what it compiled holds at most half the guard (the
// kernel cache drops the least recently used entries beyond that), so the
// next client compiles again.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "tests/e2e/e2e.h"

namespace kad {
namespace {

using client::Arg;
using client::ArgSpec;
using ::testing::HasSubstr;

constexpr uint64_t kGuardBytes = uint64_t{64} << 20;
// A kernel whose program binary holds a 2 MiB string; `salt` makes each a
// kernel no cache has seen.
std::string big_constant_source(int salt) {
  return absl::StrCat(
      "constant char big[] = \"", std::string(2 << 20, 'k'),
      "\";\n"
      "kernel void big_constant(KAD_CONTEXT, global int* out) {\n"
      "  if (kad_global_linear() == 0) out[0] = big[0] + big[(2 << 20) - 1] - 2 * 'k' + ",
      salt, ";\n}\n");
}

// Runs big_constant_source(salt) once on `q` into `out`: the launch's
// status, and the value read (salt when it ran).
absl::Status run_big_constant(Client& c, client::Queue& q, const client::Buffer& out, int salt) {
  auto m = c.load_module(big_constant_source(salt));
  if (!m.ok()) return m.status();
  auto k = c.get_kernel(*m, {.entry = "big_constant", .args = {ArgSpec::buffer()}});
  if (!k.ok()) return k.status();
  const Arg args[] = {Arg::buffer(out)};
  absl::Status s = q.launch(*k, client::Dims{1}, nullptr, args).status();
  if (s.ok()) s = q.wait();
  if (!s.ok()) return s;
  int32_t got = 0;
  if (s = q.read(out, 0, std::as_writable_bytes(std::span(&got, 1))); !s.ok()) return s;
  if (got != salt) return absl::InternalError(absl::StrCat("read ", got, ", not ", salt));
  return absl::OkStatus();
}

uint64_t host_memory_used(Client& c) {
  absl::StatusOr<client::ServiceStatus> s = c.status();
  return s.ok() ? s->host_memory_bytes : ~uint64_t{0};
}

TEST(ProgramBinaryMemory, BigProgramBinariesStayWithinKadsHostMemoryGuard) {
  auto d = testing::Daemon::start({"--max-host-memory", absl::StrCat(kGuardBytes)});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string uri = (*d)->unix_uri();
  const int first_salt = static_cast<int>((getpid() ^ time(nullptr)) & 0xffff) * 64 + 1;

  // A session whose fill kernel ran before the hostile one fills the guard.
  auto bystander = Client::connect(uri, "bystander");
  ASSERT_TRUE(bystander.ok()) << bystander.status();
  auto bq = (*bystander)->create_queue();
  auto bout = (*bystander)->allocate(16 * sizeof(int32_t));
  auto bm = (*bystander)->load_module(testing::kFillSource);
  ASSERT_TRUE(bq.ok() && bout.ok() && bm.ok()) << bm.status();
  auto fill =
      (*bystander)
          ->get_kernel(*bm,
                       {.entry = "fill",
                        .args = {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kI32)}});
  ASSERT_TRUE(fill.ok()) << fill.status();
  auto expect_fill = [&](int32_t value) {
    const Arg args[] = {Arg::buffer(*bout), Arg::scalar<int32_t>(value)};
    ASSERT_TRUE((*bq)->launch(*fill, client::Dims{16}, nullptr, args).ok());
    std::vector<int32_t> got(16);
    ASSERT_TRUE((*bq)->read(*bout, 0, testing::bytes_of(got)).ok());
    EXPECT_EQ(got, std::vector<int32_t>(16, value));
  };
  expect_fill(3);

  auto hostile = Client::connect(uri, "hostile");
  ASSERT_TRUE(hostile.ok()) << hostile.status();
  auto q = (*hostile)->create_queue();
  auto out = (*hostile)->allocate(sizeof(int32_t));
  ASSERT_TRUE(q.ok() && out.ok());
  // Each holds some 6 MiB of program binary and its 2 MiB module: the guard
  // takes fewer than 8 of them. Each one kept counts.
  absl::Status refused;
  int compiled = 0;
  uint64_t used = host_memory_used(**hostile);
  for (int i = 0; i < 16 && refused.ok(); ++i) {
    refused = run_big_constant(**hostile, **q, *out, first_salt + i);
    if (!refused.ok()) break;
    ++compiled;
    const uint64_t now = host_memory_used(**hostile);
    EXPECT_GE(now, used + (uint64_t{4} << 20)) << "the module and binary of kernel " << i;
    used = now;
  }
  ASSERT_FALSE(refused.ok()) << "kad kept " << compiled << " kernels of 8 MiB within "
                             << kGuardBytes << " bytes";
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  // Refused for its program binary or, the guard fuller still, its module.
  EXPECT_THAT(refused.message(), HasSubstr("--max-host-memory"));
  EXPECT_GE(compiled, 4) << refused;
  EXPECT_LE(host_memory_used(**hostile), kGuardBytes);
  // Meanwhile, another session's launches go on.
  expect_fill(31);

  // Gone, it leaves at most half the guard behind (the cache's bound), and
  // a new client compiles such a kernel again.
  q->reset();
  hostile->reset();
  auto next = Client::connect(uri, "next");
  ASSERT_TRUE(next.ok()) << next.status();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  absl::StatusOr<client::ServiceStatus> status = (*next)->status();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->cache_max_bytes, kGuardBytes / 2);
  EXPECT_LE(status->cache_bytes, status->cache_max_bytes);
  EXPECT_GT(status->cache_evictions, 0u) << "the cache kept every binary";
  while (host_memory_used(**next) > kGuardBytes / 2 + (uint64_t{8} << 20) &&
         std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_LE(host_memory_used(**next), kGuardBytes / 2 + (uint64_t{8} << 20));
  auto next_q = (*next)->create_queue();
  auto next_out = (*next)->allocate(sizeof(int32_t));
  ASSERT_TRUE(next_q.ok() && next_out.ok());
  EXPECT_TRUE(run_big_constant(**next, **next_q, *next_out, first_salt + 40).ok());
  EXPECT_EQ((*d)->stop(SIGTERM), 0) << (*d)->log();
}

// A worker's folder (a tmpfs of --worker-max-folder-bytes) holds its
// driver's files for each kernel it loads. A driver that cannot write them
// may crash its worker: the session is told the folder was full, with its
// bound, and the next session's worker (a folder of its own) serves.
TEST(WorkerFolderFull, ASessionWhoseWorkersFolderFilledIsToldSo) {
  auto d = testing::Daemon::start({"--worker-max-folder-bytes", "4194304"});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string uri = (*d)->unix_uri();
  auto c = Client::connect(uri, "big kernels");
  ASSERT_TRUE(c.ok()) << c.status();
  auto q = (*c)->create_queue();
  auto out = (*c)->allocate(sizeof(int32_t));
  ASSERT_TRUE(q.ok() && out.ok());
  // Each kernel leaves some 8 MiB of files: the first does not fit.
  const int salt = static_cast<int>((getpid() ^ time(nullptr)) & 0xffff) * 64 + 1;
  absl::Status failed;
  for (int i = 0; i < 4 && failed.ok(); ++i) failed = run_big_constant(**c, **q, *out, salt + i);
  ASSERT_FALSE(failed.ok()) << "4 kernels of 8 MiB of files fit in a folder of 4 MiB";
  EXPECT_THAT(failed.message(), HasSubstr("its folder was full (4194304 bytes"))
      << failed.message();
  testing::expect_bystander_served(uri, 9);
}

}  // namespace
}  // namespace kad
