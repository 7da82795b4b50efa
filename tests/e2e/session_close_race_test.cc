// A request that found its session before close_session ran, and takes the
// session's lock after, makes nothing more in it (DESIGN §8: nothing leaks,
// nothing crashes). The API fuzz found this race as a crash (a quota charge
// grown after the close gave it back); here it is played in order, on the
// engine over PoCL: the session is held as such a request holds it.
#include <string>

#include "absl/strings/match.h"
#include "backends/registry.h"
#include "gtest/gtest.h"
#include "server/engine.h"

namespace kad::server {
namespace {

constexpr char kFill[] = R"(
kernel void fill(KAD_CONTEXT, global int* out, int value) {
  if (kad_active()) out[kad_global_linear()] = value;
}
)";

void expect_closing(const absl::Status& status, const char* request) {
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << request << ": " << status;
  EXPECT_EQ(status.message(), "the session is closing: request refused") << request;
}

TEST(SessionCloseRace, RequestsThatFoundTheSessionBeforeItClosedMakeNothingInIt) {
  Engine engine(discover_devices(), EngineLimits{});
  auto opened = engine.open_session("race", "test");
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::shared_ptr<Session> s = *opened;  // what a request in flight holds
  auto module = engine.load_module(*s, ModuleFormat::kOpenClC, kFill);
  ASSERT_TRUE(module.ok()) << module.status();
  ASSERT_TRUE(engine.allocate_buffer(*s, "", 4096).ok());
  ASSERT_TRUE(engine.create_queue(*s, "").ok());

  engine.close_session(s->id());

  expect_closing(engine.allocate_buffer(*s, "", 4096).status(), "allocate");
  expect_closing(engine.load_module(*s, ModuleFormat::kOpenClC, kFill).status(), "load");
  expect_closing(engine.create_queue(*s, "").status(), "create queue");
  KernelSignature sig{"fill",
                      std::nullopt,
                      std::nullopt,
                      {ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kI32)},
                      ""};
  EXPECT_FALSE(engine.get_kernel(*s, module->handle, sig).ok()) << "its module went with it";
  {
    absl::MutexLock lock(&s->mu);
    EXPECT_TRUE(s->buffers.empty() && s->modules.empty() && s->kernels.empty() &&
                s->queues.empty() && s->isolated.empty());
  }
  // Everything is given back: the daemon's counts and the tenant's use.
  const EngineCounters c = engine.counters();
  EXPECT_EQ(c.sessions, 0u);
  EXPECT_EQ(c.buffers + c.modules + c.kernels + c.queues, 0u);
  for (const EngineCounters::TenantUse& t : c.tenants) {
    for (const auto& use : t.uses) EXPECT_EQ(use.used, 0u) << t.name << " " << use.quota;
  }
  // The engine goes on serving: a new session makes what the old one could not.
  auto next = engine.open_session("next", "test");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(engine.allocate_buffer(**next, "", 4096).ok());
}

}  // namespace
}  // namespace kad::server
