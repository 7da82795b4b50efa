// An API fuzz test of kad: random but well-formed sequences of every kad.v1
// call, at the wire level, against a real kad process started for the test.
//
// It holds a few sessions at once (opening and closing them as it goes), and
// drives each with AllocateBuffer, FreeBuffer, WriteBuffer, ReadBuffer,
// LoadModule, GetKernel, CreateQueue and Submit streams of launches, waits,
// copies and pings, with extreme sizes, offsets, ndranges and handles,
// hostile build options and broken modules, and cancels calls and streams
// midway. A model of each session (its handles, buffer sizes, issued events)
// tells it what a request names. It checks:
//  - every code (unary status, stream status, QueueReply.code) is one that
//    kad.proto documents for the call (tests/fuzz/api_fuzz_spec.cc);
//  - a reply that is not OK says why;
//  - a request the model knows to be wrong (an unknown handle, a copy past a
//    buffer's end, a build option off the allow-list, a signature that does
//    not match its kernel, a wait for an event never issued, ...) is
//    refused, with the code kad.proto names for it where it names one, and a
//    launch kad.proto allows runs;
//  - replies carry their command's tag, an empty launch completes at once,
//    copies return the bytes asked for, and fresh memory reads as zeros;
//  - a Submit stream ends (a last ABORTED reply, then CANCELLED) once its session closes;
//  - every request is answered within kRequestDeadline;
//  - kad stays up (checked after every operation), and every
//    kOperationsPerBatch operations a fresh session runs saxpy correctly;
//  - once every session is closed, kad holds no object of theirs.
// A launch kad accepts runs on the CPU: those meant to run are small, and
// large ones are only sent where kad must refuse them.
// A failure prints the seed and the last operations.
//
// KAD_API_FUZZ_SEED=<n> replays a run (kad's answers are deterministic but
// for timing: where a cancellation lands can differ), KAD_API_FUZZ_SECONDS=<s>
// sets its length (45 s by default), KAD_API_FUZZ_VERBOSE=1 prints every
// request and reply. A longer run while developing:
//   KAD_API_FUZZ_SECONDS=600 build/tests/kad_api_fuzz_tests
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tests/fuzz/api_fuzz_fuzzer.h"
#include "tests/support/daemon.h"

namespace kad::api_fuzz {
namespace {

struct Config {
  uint64_t seed;
  seconds duration;
  std::string submit_streams;  // kad's --submit-streams
};

Config config_from_environment() {
  Config c{0, seconds(45), "threads"};
  if (const char* s = std::getenv("KAD_API_FUZZ_SUBMIT_STREAMS"); s && *s) c.submit_streams = s;
  if (const char* seed = std::getenv("KAD_API_FUZZ_SEED"); seed && *seed) {
    c.seed = std::strtoull(seed, nullptr, 0);
  } else {
    c.seed = (uint64_t{std::random_device{}()} << 32) ^
             static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  }
  if (const char* s = std::getenv("KAD_API_FUZZ_SECONDS"); s && *s)
    c.duration = seconds(std::strtoll(s, nullptr, 10));
  return c;
}

TEST(ApiFuzz, BoundedRun) {
  const Config config = config_from_environment();
  std::printf(
      "kad API fuzz: seed %llu, %lld s, Submit streams on %s (replay: KAD_API_FUZZ_SEED=%llu)\n",
      static_cast<unsigned long long>(config.seed), static_cast<long long>(config.duration.count()),
      config.submit_streams.c_str(), static_cast<unsigned long long>(config.seed));
  std::fflush(stdout);
  auto daemon =
      testing::Daemon::start({"--max-sessions", std::to_string(kDaemonMaxSessions),
                              "--session-memory-quota", std::to_string(kSessionMemoryQuota),
                              "--cache-dir", "off", "--submit-streams", config.submit_streams});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const auto started = Clock::now();
  Fuzzer fuzzer(**daemon, config.seed, started + config.duration);

  // A hang no deadline catches (an OpenSession that never answers, say)
  // still ends the run with its report, and takes kad with it.
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    while (!done.load()) {
      std::this_thread::sleep_for(milliseconds(250));
      if (!done.load() && fuzzer.stalled_for() > kStallLimit) {
        std::fprintf(stderr, "kad API fuzz: an operation has run for %lld s: a hang\n%s\n",
                     static_cast<long long>(kStallLimit.count()), fuzzer.replay_report().c_str());
        std::fflush(stderr);
        kill((*daemon)->pid(), SIGKILL);
        std::_Exit(1);
      }
    }
  });
  fuzzer.run();
  done.store(true);
  watchdog.join();

  const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
  std::printf(
      "kad API fuzz: seed %llu: %llu operations (%llu requests) in %.1f s, %.1f operations/s; "
      "launches: %llu ran, %llu empty, %llu refused; %d violations\n",
      static_cast<unsigned long long>(config.seed),
      static_cast<unsigned long long>(fuzzer.operations()),
      static_cast<unsigned long long>(fuzzer.requests()), elapsed,
      static_cast<double>(fuzzer.operations()) / elapsed,
      static_cast<unsigned long long>(fuzzer.launches_run()),
      static_cast<unsigned long long>(fuzzer.launches_empty()),
      static_cast<unsigned long long>(fuzzer.launches_refused()), fuzzer.violations());
}

}  // namespace
}  // namespace kad::api_fuzz
