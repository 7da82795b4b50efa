// kad-demo: launches a kernel through the generic pipeline, in process, on the
// default device (PoCL on the CPU), and checks the result. The README's first
// command runs it; it becomes a client of the daemon once the daemon exists.
#include <cmath>
#include <cstdio>
#include <vector>

#include "backends/registry.h"
#include "core/kernel.h"
#include "core/kernel_cache.h"
#include "core/launch.h"

namespace {

constexpr char kSaxpy[] = R"(
kernel void saxpy(KAD_CONTEXT, global float* z, float a,
                  const global float* restrict x, const global float* restrict y) {
  if (kad_active()) {
    long i = kad_global_linear();
    z[i] = a * x[i] + y[i];
  }
}
)";

int fail(const absl::Status& s) {
  std::fprintf(stderr, "kad-demo: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main() {
  using namespace kad;
  DeviceRegistry registry = discover_devices();
  for (const std::string& line : registry.log) std::printf("%s\n", line.c_str());
  Device* device = registry.default_device();
  if (device == nullptr) return fail(absl::NotFoundError("no device found"));
  const DeviceInfo& info = device->info();
  std::printf("device:  %s  \"%s\" (%s), max workgroup %llu, %llu compute units\n",
              info.id.c_str(), info.name.c_str(), info.platform.c_str(),
              static_cast<unsigned long long>(info.limits.max_workgroup_size),
              static_cast<unsigned long long>(info.limits.compute_units));

  auto module = Module::create(ModuleFormat::kOpenClC, kSaxpy);
  if (!module.ok()) return fail(module.status());
  KernelSignature sig;
  sig.entry = "saxpy";
  sig.args = {ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kF32), ArgSpec::const_buffer(),
              ArgSpec::const_buffer()};
  auto kernel = Kernel::create(*module, sig);
  if (!kernel.ok()) return fail(kernel.status());

  const int64_t n = 100000;
  std::vector<float> x(n), y(n), z(n, NAN);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = static_cast<float>(2 * i);
  }
  auto queue = device->create_queue();
  if (!queue.ok()) return fail(queue.status());
  auto bz = device->allocate(n * sizeof(float));
  auto bx = device->allocate(n * sizeof(float));
  auto by = device->allocate(n * sizeof(float));
  for (auto* b : {&bz, &bx, &by})
    if (!b->ok()) return fail(b->status());
  for (auto [buf, data] : {std::pair{bx->get(), &x}, {by->get(), &y}, {bz->get(), &z}}) {
    if (auto s = (*queue)->write_buffer(*buf, 0, std::as_bytes(std::span(*data))); !s.ok())
      return fail(s);
  }

  KernelCache cache;
  const float a = 3.0f;
  const KernelArg args[] = {KernelArg::of_buffer(**bz), KernelArg::of_scalar(a),
                            KernelArg::of_buffer(**bx), KernelArg::of_buffer(**by)};
  const NdRange range(Dims{n});
  auto result = launch(**kernel, **queue, cache, {&range, nullptr, args});
  if (!result.ok()) return fail(result.status());
  if (auto s = (*queue)->wait(result->event); !s.ok()) return fail(s);
  if (auto s = (*queue)->read_buffer(**bz, 0, std::as_writable_bytes(std::span(z))); !s.ok())
    return fail(s);

  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += z[i] != a * x[i] + y[i];
  std::printf("kernel:  saxpy over ndrange %s\n", to_string(range).c_str());
  std::printf("launch:  %s; workgroup %s (tuned), %s groups\n", to_string(result->choice).c_str(),
              to_string(result->workgroup).c_str(), to_string(result->groups).c_str());
  std::printf("result:  z[0]=%g z[%lld]=%g; %lld of %lld elements wrong -> %s\n", z[0],
              static_cast<long long>(n - 1), z[n - 1], static_cast<long long>(wrong),
              static_cast<long long>(n), wrong == 0 ? "OK" : "FAILED");
  return wrong == 0 ? 0 : 1;
}
