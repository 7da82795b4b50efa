// A Kernel's own table of compiled specializations (DESIGN §3.3, §8): it
// keeps alive what it used, so the shared cache may drop an entry (it is
// bounded) while the kernel's launches go on with it; and it is bounded
// itself, refusing a specialization past kMaxSpecializations by name. The
// device here compiles instantly; real compiles through the same path run
// on PoCL in tests/opencl and tests/e2e.
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "core/kernel.h"
#include "core/kernel_cache.h"
#include "gtest/gtest.h"
#include "tests/core/compiled_stand_in.h"

namespace kad {
namespace {

using testing::CompiledStandIn;

// Compiles anything at once; runs nothing.
class CompilingDevice final : public Device {
 public:
  CompilingDevice() {
    info_.backend = "test";
    info_.id = "test:0";
  }
  const DeviceInfo& info() const override { return info_; }
  absl::StatusOr<std::unique_ptr<Buffer>> allocate(uint64_t) override {
    return absl::UnimplementedError("no memory");
  }
  absl::StatusOr<std::unique_ptr<Queue>> create_queue() override {
    return absl::UnimplementedError("no queue");
  }
  absl::StatusOr<std::unique_ptr<CompiledKernel>> compile(const CompileRequest&) override {
    ++compiles;
    return std::make_unique<CompiledStandIn>();
  }
  int compiles = 0;

 private:
  DeviceInfo info_;
};

// The `i`th of many distinct specializations.
Specialization nth(int i) {
  Specialization s;
  s.static_ndrange = NdRange(Dims{static_cast<int64_t>(i + 1)});
  return s;
}

TEST(KernelTable, AKernelKeepsWhatTheBoundedCacheDroppedAndIsBoundedItself) {
  auto module = Module::create(ModuleFormat::kOpenClC, "kernel void k(KAD_CONTEXT) {}\n");
  ASSERT_TRUE(module.ok()) << module.status();
  auto kernel = Kernel::create(*module, {"k", std::nullopt, std::nullopt, {}, ""});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  CompilingDevice device;
  KernelCache cache(2);  // far fewer entries than the kernel uses

  std::vector<CompiledKernel*> first;
  for (int i = 0; i < static_cast<int>(Kernel::kMaxSpecializations); ++i) {
    bool compiled = false;
    auto c = (*kernel)->specialization(device, nth(i), cache, &compiled);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(compiled);
    first.push_back(*c);
  }
  EXPECT_EQ(cache.stats().entries, 2u);
  EXPECT_EQ(cache.stats().evictions, Kernel::kMaxSpecializations - 2);
  // Every one is still the kernel's: the same object, no compile again.
  for (int i = 0; i < static_cast<int>(Kernel::kMaxSpecializations); ++i) {
    bool compiled = true;
    auto c = (*kernel)->specialization(device, nth(i), cache, &compiled);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_FALSE(compiled);
    EXPECT_EQ(*c, first[static_cast<size_t>(i)]) << "specialization " << i;
  }
  EXPECT_EQ(device.compiles, static_cast<int>(Kernel::kMaxSpecializations));

  // One more is refused, naming the kernel and the bound; nothing compiles.
  bool compiled = false;
  auto more = (*kernel)->specialization(device, nth(static_cast<int>(Kernel::kMaxSpecializations)),
                                        cache, &compiled);
  EXPECT_EQ(more.status().code(), absl::StatusCode::kResourceExhausted) << more.status();
  EXPECT_TRUE(absl::StrContains(more.status().message(), "kernel `k` holds 64 compiled"))
      << more.status();
  EXPECT_EQ(device.compiles, static_cast<int>(Kernel::kMaxSpecializations));
}

}  // namespace
}  // namespace kad
