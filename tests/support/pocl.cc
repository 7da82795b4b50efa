#include "tests/support/pocl.h"

#include <cstdlib>

#include "backends/registry.h"

namespace kad::testing {

Device& pocl_device() {
  static DeviceRegistry* registry = new DeviceRegistry(discover_devices());
  // KAD_TEST_DEVICE runs the device tests on another device (a GPU: see
  // bench/gpu-check.sh); PoCL is every machine's default.
  const char* chosen = std::getenv("KAD_TEST_DEVICE");
  for (const auto& d : registry->devices) {
    if (chosen ? d->info().id == chosen : d->info().platform == "Portable Computing Language")
      return *d;
  }
  std::string log;
  for (const std::string& line : registry->log) log += line + "\n";
  ADD_FAILURE() << "no " << (chosen ? chosen : "PoCL") << " device found; discovery said:\n" << log;
  std::abort();
}

void PoclTest::SetUp() {
  device_ = &pocl_device();
  auto q = device_->create_queue();
  ASSERT_TRUE(q.ok()) << q.status();
  queue_ = *std::move(q);
}

std::unique_ptr<Kernel> PoclTest::make_kernel(const std::string& source,
                                              KernelSignature signature) {
  auto module = Module::create(ModuleFormat::kOpenClC, source);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return nullptr;
  auto kernel = Kernel::create(*module, std::move(signature));
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok()) return nullptr;
  return *std::move(kernel);
}

absl::StatusOr<LaunchResult> PoclTest::run(Kernel& kernel, const NdRange* ndrange,
                                           const Dims* workgroup, std::span<const KernelArg> args) {
  absl::StatusOr<LaunchResult> r = launch(kernel, *queue_, cache_, {ndrange, workgroup, args});
  if (!r.ok()) return r;
  if (absl::Status s = queue_->wait(r->event); !s.ok()) return s;
  return r;
}

}  // namespace kad::testing
