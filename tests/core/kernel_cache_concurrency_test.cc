// KernelCache under concurrent requests (DESIGN §8): a compile holds no lock
// another key needs, and requests for a key being compiled wait for that one
// compile and share it. The compiles here are gates the test opens, so each
// order is forced rather than hoped for; the cache's own behaviour with real
// kernels is tested on PoCL (tests/opencl/kernel_cache_test.cc).
#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/kernel_cache.h"
#include "gtest/gtest.h"
#include "tests/core/compiled_stand_in.h"

namespace kad {
namespace {

using testing::CompiledStandIn;

SpecializationKey key_of(const std::string& entry) {
  SpecializationKey key;
  key.module_digest = "0123";
  key.entry = entry;
  key.device_id = "test:0";
  return key;
}

// A compile that starts, then waits for the test to open it, and ends with
// `result`'s outcome: a stand-in, or the error given.
struct GatedCompile {
  absl::Status result;  // OK: the compile succeeds
  std::atomic<int> runs{0};
  absl::Notification started, release;

  absl::StatusOr<std::unique_ptr<CompiledKernel>> operator()() {
    runs.fetch_add(1);
    if (!started.HasBeenNotified()) started.Notify();
    release.WaitForNotification();
    if (!result.ok()) return result;
    return std::make_unique<CompiledStandIn>();
  }
};

TEST(KernelCacheConcurrency, ASlowCompileDoesNotDelayAnotherKey) {
  KernelCache cache;
  absl::Notification slow_started, release_slow;
  std::thread slow([&] {
    auto r = cache.get_or_compile(key_of("slow"),
                                  [&]() -> absl::StatusOr<std::unique_ptr<CompiledKernel>> {
                                    slow_started.Notify();
                                    release_slow.WaitForNotification();
                                    return std::make_unique<CompiledStandIn>();
                                  });
    EXPECT_TRUE(r.ok());
  });
  slow_started.WaitForNotification();
  // While "slow" compiles, another key compiles and the stats answer.
  auto fast =
      cache.get_or_compile(key_of("fast"), []() -> absl::StatusOr<std::unique_ptr<CompiledKernel>> {
        return std::make_unique<CompiledStandIn>();
      });
  EXPECT_TRUE(fast.ok());
  EXPECT_EQ(cache.stats().compilations, 1u);
  EXPECT_FALSE(release_slow.HasBeenNotified());
  release_slow.Notify();
  slow.join();
  EXPECT_EQ(cache.stats().compilations, 2u);
}

TEST(KernelCacheConcurrency, RequestsForAKeyBeingCompiledWaitForThatOneCompile) {
  KernelCache cache;
  GatedCompile compile;
  auto request = [&] { return cache.get_or_compile(key_of("k"), std::ref(compile))->get(); };
  std::vector<CompiledKernel*> got(8, nullptr);
  std::vector<std::thread> threads;
  threads.emplace_back([&] { got[0] = request(); });
  compile.started.WaitForNotification();
  for (size_t i = 1; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = request(); });
  // Let the waiters reach the cache; none may start a compile of its own.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  compile.release.Notify();
  for (auto& t : threads) t.join();
  EXPECT_EQ(compile.runs.load(), 1);
  for (CompiledKernel* k : got) EXPECT_EQ(k, got[0]);
  EXPECT_EQ(cache.stats().compilations, 1u);
  EXPECT_EQ(cache.stats().entries, 1u);
}

TEST(KernelCacheConcurrency, WaitersOfAFailedCompileGetItsErrorAndItIsRemembered) {
  KernelCache cache;
  GatedCompile failing;
  failing.result = absl::InvalidArgumentError("kernel `k`: 1 error generated");
  auto request = [&] { return cache.get_or_compile(key_of("k"), std::ref(failing)).status(); };
  absl::Status first, second;
  std::thread a([&] { first = request(); });
  failing.started.WaitForNotification();
  std::thread b([&] { second = request(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  failing.release.Notify();
  a.join();
  b.join();
  EXPECT_EQ(first.message(), "kernel `k`: 1 error generated");
  EXPECT_EQ(second, first);
  // Remembered: a later request is answered without compiling.
  EXPECT_EQ(request(), first);
  EXPECT_EQ(failing.runs.load(), 1);
  EXPECT_EQ(cache.find(key_of("k")).status(), first);
}

absl::StatusOr<std::unique_ptr<CompiledKernel>> stand_in() {
  return std::make_unique<CompiledStandIn>();
}

// DESIGN §8: the cache is bounded; past its size it drops the entry least
// recently used by a launch (a hit), not the oldest compiled.
TEST(KernelCacheBound, PastItsSizeTheLeastRecentlyUsedEntryIsDropped) {
  KernelCache cache(3);
  std::shared_ptr<CompiledKernel> a = *cache.get_or_compile(key_of("a"), stand_in);
  ASSERT_TRUE(cache.get_or_compile(key_of("b"), stand_in).ok());
  ASSERT_TRUE(cache.get_or_compile(key_of("c"), stand_in).ok());
  // `a`, compiled first, is used again (as a Kernel's table does): `b` is now
  // the least recently used.
  cache.record_hit(*a);
  ASSERT_TRUE(cache.get_or_compile(key_of("d"), stand_in).ok());
  EXPECT_EQ(cache.stats().entries, 3u);
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(cache.stats().max_entries, 3u);
  EXPECT_NE(*cache.find(key_of("a")), nullptr);
  EXPECT_EQ(*cache.find(key_of("b")), nullptr) << "the least recently used entry was kept";
  EXPECT_NE(*cache.find(key_of("c")), nullptr);
  EXPECT_NE(*cache.find(key_of("d")), nullptr);
  // A dropped key compiles again; what held the old entry still holds it.
  std::shared_ptr<CompiledKernel> held = *cache.find(key_of("c"));
  for (const char* k : {"e", "f", "g"}) ASSERT_TRUE(cache.get_or_compile(key_of(k), stand_in).ok());
  EXPECT_EQ(*cache.find(key_of("c")), nullptr);
  EXPECT_EQ(held.use_count(), 1) << "kept alive by its holder alone";
  EXPECT_EQ(cache.stats().compilations, 7u);
  EXPECT_EQ(cache.stats().entries, 3u);
}

// What a compile learnt of a kernel's parameters is kept per module, entry
// and build options (macros may change them), for the most recent
// kMaxRememberedParameters of those: a client loading module after module
// cannot grow it without bound.
TEST(KernelCacheBound, KnownParametersArePerBuildOptionsAndBounded) {
  KernelCache cache(1);
  const std::vector<KernelParameter> one{{KernelParameter::Space::kGlobal, false, "int*", "out"}};
  auto reporting = [&]() -> absl::StatusOr<std::unique_ptr<CompiledKernel>> {
    return std::make_unique<CompiledStandIn>(0, one);
  };
  SpecializationKey key = key_of("k");
  key.build_options = "-DA";
  ASSERT_TRUE(cache.get_or_compile(key, reporting).ok());
  EXPECT_EQ(cache.parameters(key.module_digest, "k", "-DA"), one);
  EXPECT_EQ(cache.parameters(key.module_digest, "k", ""), std::nullopt);
  for (size_t i = 0; i < KernelCache::kMaxRememberedParameters; ++i) {
    key.module_digest = absl::StrCat("module ", i);
    ASSERT_TRUE(cache.get_or_compile(key, reporting).ok());
  }
  EXPECT_EQ(cache.parameters("0123", "k", "-DA"), std::nullopt) << "the oldest was kept";
  EXPECT_EQ(cache.parameters(key.module_digest, "k", "-DA"), one);
}

// DESIGN §8: a client can make a kernel whose program binary is tens of
// MiB (a large constant array) in a fraction of a second; the cache keeps
// at most its byte bound of them, dropping the least recently used, and
// always keeps the newest entry however large.
TEST(KernelCacheBound, PastItsBytesTheLeastRecentlyUsedEntriesAreDropped) {
  KernelCache cache(100, 100);
  auto of = [](uint64_t bytes) {
    return [bytes]() -> absl::StatusOr<std::unique_ptr<CompiledKernel>> {
      return std::make_unique<CompiledStandIn>(bytes);
    };
  };
  std::shared_ptr<CompiledKernel> a = *cache.get_or_compile(key_of("a"), of(40));
  ASSERT_TRUE(cache.get_or_compile(key_of("b"), of(40)).ok());
  EXPECT_EQ(cache.stats().bytes, 80u);
  cache.record_hit(*a);  // `b` is now the least recently used
  ASSERT_TRUE(cache.get_or_compile(key_of("c"), of(30)).ok());
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(*cache.find(key_of("b")), nullptr) << "the least recently used entry was kept";
  EXPECT_NE(*cache.find(key_of("a")), nullptr);
  EXPECT_EQ(cache.stats().bytes, 70u);
  EXPECT_EQ(cache.stats().max_bytes, 100u);
  // Larger than the bound alone: everything older goes, it stays.
  ASSERT_TRUE(cache.get_or_compile(key_of("huge"), of(500)).ok());
  EXPECT_EQ(cache.stats().entries, 1u);
  EXPECT_EQ(cache.stats().bytes, 500u);
  EXPECT_NE(*cache.find(key_of("huge")), nullptr);
  // Entries that hold nothing in the daemon count only against max_entries.
  ASSERT_TRUE(cache.get_or_compile(key_of("small"), of(0)).ok());
  EXPECT_EQ(cache.stats().entries, 1u) << "the huge entry, older now, is over the bound";
  EXPECT_EQ(cache.stats().bytes, 0u);
  EXPECT_EQ(a.use_count(), 1) << "kept alive by its holder alone";
}

}  // namespace
}  // namespace kad
