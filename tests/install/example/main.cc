// Scales a vector on kad's default device and checks it: kad_example URI
#include <kad/client.h>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  using kad::client::Arg;
  using kad::client::ArgSpec;
  if (argc != 2) return 2;
  auto client = kad::Client::connect(argv[1], "kad_example");
  if (!client.ok()) return std::fprintf(stderr, "%s\n", client.status().ToString().c_str()), 1;
  auto queue = (*client)->create_queue().value();
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  auto buffer = (*client)->allocate(x.size() * sizeof(float)).value();
  if (!queue->write(buffer, 0, std::as_bytes(std::span(x))).ok()) return 1;
  auto module = (*client)
                    ->load_module(R"(
kernel void scale(KAD_CONTEXT, global float* x, float a) {
  if (kad_active()) x[kad_global_linear()] *= a;
})")
                    .value();
  auto kernel =
      (*client)
          ->get_kernel(module, {.entry = "scale",
                                .args = {ArgSpec::buffer(),
                                         ArgSpec::scalar_of(kad::client::ScalarType::kF32)}})
          .value();
  const Arg args[] = {Arg::buffer(buffer), Arg::scalar(3.0f)};
  auto launched = queue->launch(kernel, kad::client::Dims{1000}, nullptr, args);
  if (!launched.ok()) return std::fprintf(stderr, "%s\n", launched.status().ToString().c_str()), 1;
  if (!queue->read(buffer, 0, std::as_writable_bytes(std::span(x))).ok()) return 1;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] != 3.0f * static_cast<float>(i)) return std::fprintf(stderr, "wrong at %zu\n", i), 1;
  std::printf("kad_example: 1000 elements scaled on kad, all correct\n");
  return 0;
}
