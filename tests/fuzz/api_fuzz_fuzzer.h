// The API fuzzer: drives a kad daemon with random but well-formed kad.v1
// requests and checks every reply against kad.proto (see api_fuzz_test.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/fuzz/api_fuzz_kernels.h"
#include "tests/fuzz/api_fuzz_model.h"
#include "tests/fuzz/api_fuzz_spec.h"
#include "tests/fuzz/api_fuzz_wire.h"
#include "tests/support/daemon.h"

namespace kad::api_fuzz {

using std::chrono::milliseconds;
using std::chrono::seconds;

inline constexpr int kOperationsPerBatch = 50;  // then a fresh session runs saxpy
inline constexpr size_t kJournalLines = 24;
inline constexpr size_t kOwnSessions = 4;  // the fuzzer's sessions at once
// The kad under test runs with these (--max-sessions, --session-memory-quota).
inline constexpr uint64_t kDaemonMaxSessions = 8;
inline constexpr uint64_t kSessionMemoryQuota = uint64_t{64} << 20;
inline constexpr uint64_t kMaxChunk = uint64_t{1} << 20;  // kad.proto: chunks and copies
inline constexpr int64_t kCheapItems = 256;               // work-items of a launch meant to run
// Work-items (padding included) an accepted launch may cost: a launch the
// fuzzer expects kad to accept runs on the CPU.
inline constexpr long double kAffordableItems = 1 << 22;
// Far more work-items than a CPU finishes before the run ends; PoCL's limits
// (4096 items per group, 2^32 - 1 groups) refuse them. Sent now and then to
// find launches kad lets through to the driver.
inline const long double kHugeItems = std::ldexp(1.0L, 45);
inline const long double kMaxItems = std::ldexp(1.0L, 63) - 1;  // DESIGN §3: more is an error
// A fuzzer operation that runs longer than this is a hang.
inline constexpr seconds kStallLimit{75};

// The last operations, for a failure's report (the watchdog reads it too);
// with KAD_API_FUZZ_VERBOSE set, every one is printed as it happens.
class Journal {
 public:
  void add(std::string line) {
    std::lock_guard<std::mutex> lock(mu_);
    if (verbose_) std::fprintf(stderr, "%s\n", line.c_str());
    lines_.push_back(std::move(line));
    if (lines_.size() > kJournalLines) lines_.pop_front();
  }
  std::string dump() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const std::string& l : lines_) out += "  " + l + "\n";
    return out;
  }

 private:
  const bool verbose_ = std::getenv("KAD_API_FUZZ_VERBOSE") != nullptr;
  mutable std::mutex mu_;
  std::deque<std::string> lines_;
};

// The default device's limits the model needs.
struct DeviceFacts {
  std::string id;
  uint64_t max_workgroup_size = 0;
  uint64_t local_memory_bytes = 0;
  uint64_t max_allocation_bytes = 0;
};

// What the model expects of a launch.
struct LaunchPlan {
  Defects defects;  // kad must refuse it
  bool empty = false;
  bool huge = false;      // at least kHugeItems work-items
  long double cost = 0;   // work-items it runs if accepted, padding included (a bound)
  bool must_run = false;  // kad.proto allows it and nothing can make it fail
  const KernelModel* kernel = nullptr;
};

// A Submit command written and awaiting its reply.
struct Pending {
  v1::QueueCommand command;
  Call call = Call::kPing;
  Defects defects;
  bool exact = false;  // a refusal must carry one of the defects' codes
  uint64_t queue = 0;  // the queue it runs on
  LaunchPlan launch;
  uint64_t copy_size = 0;     // copy_out
  bool expect_zeros = false;  // copy_out of a buffer nothing wrote
};

// A Submit stream's binding: the first command naming a queue binds it.
struct StreamState {
  uint64_t first_queue = 0;
  uint64_t bound = 0;
  uint64_t next_tag = 0;
};

using SubmitStream = grpc::ClientReaderWriter<v1::QueueCommand, v1::QueueReply>;

class Fuzzer {
 public:
  // Fuzzes `daemon` from `seed` until `end`.
  Fuzzer(testing::Daemon& daemon, uint64_t seed, Clock::time_point end);
  void run();

  uint64_t operations() const { return operation_; }
  uint64_t requests() const { return requests_; }
  int violations() const { return violations_; }
  // Launches kad ran (an ndrange with work), completed at once (empty) and refused.
  uint64_t launches_run() const { return launches_run_; }
  uint64_t launches_empty() const { return launches_empty_; }
  uint64_t launches_refused() const { return launches_refused_; }
  // How long the current operation has run.
  Clock::duration stalled_for() const {
    return Clock::now() - Clock::time_point(Clock::duration(last_beat_.load()));
  }
  // The seed, the last operations and kad's last log lines.
  std::string replay_report() const;

 private:
  void beat() { last_beat_.store(Clock::now().time_since_epoch().count()); }
  bool setup();
  void step();
  void finish();

  // Operations.
  void open_session();
  void close_session(size_t index);
  void close_session_under_stream();
  void await_session_gone(const std::string& id);
  void flood_sessions();
  void list_devices();
  void get_status();
  void call_without_session();
  void allocate_buffer(const Target& t);
  void free_buffer(const Target& t);
  void write_buffer(const Target& t);
  void read_buffer(const Target& t);
  void load_module(const Target& t);
  void get_kernel(const Target& t);
  void create_queue(const Target& t);
  void submit(const Target& t);
  void check_daemon_serves();

  // Submit commands.
  Pending next_command(const Target& t, StreamState& st, bool first);
  // Draws a launch: half of them meant to run, the rest anything.
  void fill_launch(SessionModel& s, v1::Launch* l);
  // What the model expects of `l` on `queue`.
  LaunchPlan plan_launch(const SessionModel& s, uint64_t queue, const v1::Launch& l) const;
  bool await_reply(const Target& t, SubmitStream& stream, std::deque<Pending>& awaiting);

  // Requests.
  Target live_target(SessionModel& s) {
    return {&s, s.wire->id(), {}, "s" + std::to_string(s.ordinal)};
  }
  SessionModel& any_session() { return *sessions_[rng_.below(sessions_.size())]; }
  uint64_t pick_handle(const SessionModel& s, Kind kind);
  uint64_t pick_offset(uint64_t size, uint64_t length);
  uint64_t pick_copy_length(uint64_t size);
  std::string random_bytes(size_t n);
  std::string pick_device_id(bool* bogus);
  v1::NdRange make_ndrange(SizeClass c);
  v1::Workgroup make_workgroup(SizeClass c);
  std::string make_build_options(KernelModel* k);
  v1::ArgSpec random_arg_spec();
  uint64_t scalar_bits();
  template <typename Request, typename Response>
  grpc::Status unary(grpc::Status (v1::Kad::Stub::*method)(grpc::ClientContext*, const Request&,
                                                           Response*),
                     const Target& t, const Request& request, Response* response, bool cancel,
                     Clock::duration* elapsed);

  // Checks one reply: its code is documented for `call`, a refusal says why,
  // and it refuses a request with defects (with one of their codes if
  // `exact`). `context` goes into a report; `elapsed` tells a hang.
  void check(Call call, const std::string& request, int code, const std::string& message,
             const Defects& defects, bool exact, bool cancelled, Clock::duration elapsed,
             const std::string& context = "");
  // Reports a broken rule (once per rule and call); a fatal one ends the run.
  void violation(const std::string& rule, Call call, const std::string& detail, bool fatal);
  // A fatal violation if kad has died.
  void check_alive();

  testing::Daemon& daemon_;
  const uint64_t seed_;
  const Clock::time_point end_;
  Random rng_;
  Connection connection_;
  const seconds session_lifetime_;
  DeviceFacts device_;
  IrModules ir_;
  std::string random_pool_;
  std::vector<std::unique_ptr<SessionModel>> sessions_;
  // Recently closed sessions, and whether kad has been seen to have reclaimed
  // each (it does so asynchronously, after the session stream's cancel).
  struct ClosedSession {
    std::string id;
    bool gone = false;
  };
  std::deque<ClosedSession> closed_sessions_;
  int sessions_opened_ = 0;
  std::set<std::string> seen_session_ids_;
  // (module digest, entry, build options) some session has compiled:
  // GetKernel must check a signature with the same options against them at
  // once (other options may define other parameters).
  std::set<std::tuple<std::string, std::string, std::string>> compiled_;
  Journal journal_;
  std::set<std::string> reported_;  // "rule / call" of the violations reported
  int violations_ = 0;
  bool stopped_ = false;
  bool hang_seen_ = false;               // a request went unanswered in this operation
  Call last_call_ = Call::kListDevices;  // of the last reply checked: where kad died
  std::atomic<uint64_t> operation_{0};
  uint64_t requests_ = 0;
  uint64_t launches_run_ = 0, launches_empty_ = 0, launches_refused_ = 0;
  std::atomic<Clock::rep> last_beat_{0};
};

}  // namespace kad::api_fuzz
