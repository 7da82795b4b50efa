// A new client's first launch, as time_to_load measures it: a process that
// links libkad_client alone (as a user's program does, not kad_bench's
// engine, backends and drivers) connects to URI, loads the kernel the daemon
// has cached, launches it once and waits. Exit status 0 when all of it worked.
#include <cstdio>

#include "bench/client_runner.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kad_bench_client URI\n");
    return 2;
  }
  kad_bench::ClientRunner runner(argv[1]);
  absl::Status s = runner.setup(kad_bench::first_launch_work());
  if (s.ok()) s = runner.run();
  if (s.ok()) kad_bench::note_first_launch();
  if (!s.ok()) std::fprintf(stderr, "kad_bench_client: %s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}
