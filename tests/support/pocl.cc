#include "tests/support/pocl.h"

#include <cctype>
#include <cstdlib>

namespace kad::testing {

const DeviceRegistry& test_registry() {
  static DeviceRegistry* registry = new DeviceRegistry(discover_devices());
  return *registry;
}

std::vector<Device*> test_devices() {
  // KAD_TEST_DEVICE runs the device tests on one device (a GPU: see
  // bench/gpu-check.sh).
  const char* chosen = std::getenv("KAD_TEST_DEVICE");
  std::vector<Device*> devices;
  for (const auto& d : test_registry().devices)
    if (chosen == nullptr || d->info().id == chosen) devices.push_back(d.get());
  return devices;
}

std::string test_name_of(const std::string& device_id) {
  std::string name = device_id;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

Device& pocl_device() {
  // PoCL is every machine's default; KAD_TEST_DEVICE names another.
  const char* chosen = std::getenv("KAD_TEST_DEVICE");
  for (const auto& d : test_registry().devices) {
    if (chosen ? d->info().id == chosen : d->info().platform == "Portable Computing Language")
      return *d;
  }
  std::string log;
  for (const std::string& line : test_registry().log) log += line + "\n";
  ADD_FAILURE() << "no " << (chosen ? chosen : "PoCL") << " device found; discovery said:\n" << log;
  std::abort();
}

void DeviceTest::use_device(Device& device) {
  device_ = &device;
  auto q = device_->create_queue();
  ASSERT_TRUE(q.ok()) << device.info().id << ": " << q.status();
  queue_ = *std::move(q);
}

std::unique_ptr<Kernel> DeviceTest::make_kernel(const std::string& source,
                                                KernelSignature signature) {
  auto module = Module::create(ModuleFormat::kOpenClC, source);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return nullptr;
  auto kernel = Kernel::create(*module, std::move(signature));
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok()) return nullptr;
  return *std::move(kernel);
}

absl::StatusOr<LaunchResult> DeviceTest::run(Kernel& kernel, const NdRange* ndrange,
                                             const Dims* workgroup,
                                             std::span<const KernelArg> args) {
  absl::StatusOr<LaunchResult> r = launch(kernel, *queue_, cache_, {ndrange, workgroup, args});
  if (!r.ok()) return r;
  if (absl::Status s = queue_->wait(r->event); !s.ok()) return s;
  return r;
}

absl::StatusOr<SourceCompile> source_compile(const Device& device, const std::string& source,
                                             const std::string& entry) {
  absl::StatusOr<std::shared_ptr<const Module>> module =
      Module::create(ModuleFormat::kOpenClC, source);
  if (!module.ok()) return module.status();
  SourceCompile c;
  c.module = *std::move(module);
  c.signature.entry = entry;
  c.signature.args = {ArgSpec::buffer()};
  c.spec.choice.rank = 1;
  c.key.module_digest = c.module->digest();
  c.key.entry = entry;
  c.key.device_id = device.info().id;
  c.key.spec = c.spec;
  c.key.toolchain_version = device.info().toolchain_version + " / " + device.info().driver_version;
  return c;
}

}  // namespace kad::testing
