// kad-demo: a client of a running kad. Runs saxpy on the daemon's default
// device (PoCL on the CPU unless a GPU is there) and checks every element.
//   kad-demo [URI]     (default $KAD_ADDRESS, else the default socket)
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "kad/client.h"

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

std::string address(int argc, char** argv) {
  if (argc > 1) return argv[1];
  if (const char* a = std::getenv("KAD_ADDRESS"); a && *a) return a;
  return geteuid() == 0 ? "unix:/run/kad/kad.sock"
                        : absl::StrFormat("unix:/tmp/kad-%d.sock", geteuid());
}

}  // namespace

int main(int argc, char** argv) {
  using kad::client::Arg;
  using kad::client::ArgSpec;
  const std::string uri = address(argc, argv);
  auto client = kad::Client::connect(uri, "kad-demo");
  if (!client.ok()) return fail(client.status());
  auto devices = (*client)->devices();
  if (!devices.ok()) return fail(devices.status());
  for (const auto& d : *devices) {
    if (!d.is_default) continue;
    absl::PrintF("device:  %s \"%s\" (%s), max workgroup %d, %d compute units\n", d.id, d.name,
                 d.platform, d.max_workgroup_size, d.compute_units);
  }

  const int64_t n = 100000;
  std::vector<float> x(n), y(n), z(n, NAN);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = static_cast<float>(2 * i);
  }
  auto queue = (*client)->create_queue();
  if (!queue.ok()) return fail(queue.status());
  std::vector<kad::client::Buffer> buffers;
  for (auto* host : {&z, &x, &y}) {
    auto b = (*client)->allocate(n * sizeof(float));
    if (!b.ok()) return fail(b.status());
    if (auto s = (*queue)->write(*b, 0, std::as_bytes(std::span(*host))); !s.ok()) return fail(s);
    buffers.push_back(*b);
  }
  auto module = (*client)->load_module(kSaxpy);
  if (!module.ok()) return fail(module.status());
  auto kernel = (*client)->get_kernel(
      *module, {.entry = "saxpy",
                .args = {ArgSpec::buffer(), ArgSpec::scalar_of(kad::client::ScalarType::kF32),
                         ArgSpec::const_buffer(), ArgSpec::const_buffer()}});
  if (!kernel.ok()) return fail(kernel.status());
  const float a = 3.0f;
  const Arg args[] = {Arg::buffer(buffers[0]), Arg::scalar(a), Arg::buffer(buffers[1]),
                      Arg::buffer(buffers[2])};
  // Launch and wait for it: one round trip to kad.
  auto launched = (*queue)->run(*kernel, kad::client::Dims{n}, nullptr, args);
  if (!launched.ok()) return fail(launched.status());
  if (auto s = (*queue)->read(buffers[0], 0, std::as_writable_bytes(std::span(z))); !s.ok())
    return fail(s);

  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += z[i] != a * x[i] + y[i];
  // Not the session id: it is the session's credential.
  absl::PrintF("kad:     %s\n", uri);
  absl::PrintF("kernel:  saxpy over ndrange (%d)\n", n);
  absl::PrintF("launch:  %s, %d-bit indices, rank %d; workgroup (%d) (tuned)\n",
               launched->linear ? "linear" : "N-d grid", launched->index_bits, launched->rank,
               launched->workgroup[0]);
  absl::PrintF("result:  z[0]=%g z[%d]=%g; %d of %d elements wrong -> %s\n", z[0], n - 1, z[n - 1],
               wrong, n, wrong == 0 ? "OK" : "FAILED");
  return wrong == 0 ? 0 : 1;
}
