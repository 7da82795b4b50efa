// The API fuzzer's model of what it asked kad for: each session's handles,
// buffer sizes and issued events, and what makes a request wrong (its
// defects, each with the code kad.proto gives it).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kad/v1/kad.grpc.pb.h"
#include "tests/fuzz/api_fuzz_kernels.h"
#include "tests/fuzz/api_fuzz_spec.h"
#include "tests/fuzz/api_fuzz_wire.h"

namespace kad::api_fuzz {

using grpc::StatusCode;

// The run's only source of randomness: a run is replayed from its seed.
class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  uint64_t bits() { return engine_(); }
  // In [0, n); 0 when n is 0. (The modulo keeps runs the same on every
  // standard library, which distributions do not promise.)
  uint64_t below(uint64_t n) { return n == 0 ? 0 : bits() % n; }
  bool chance(double p) { return static_cast<double>(bits() >> 11) * 0x1.0p-53 < p; }
  template <typename T>
  T pick(std::initializer_list<T> items) {
    return *(items.begin() + below(items.size()));
  }
  template <typename T>
  const T& pick(const std::vector<T>& items) {
    return items[below(items.size())];
  }
  template <typename T>
  void shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(i)]);
  }
  // An index into `weights`, drawn in proportion.
  size_t weighted(std::initializer_list<double> weights) {
    double total = 0;
    for (double w : weights) total += w;
    double x = static_cast<double>(bits() >> 11) * 0x1.0p-53 * total;
    size_t i = 0;
    for (double w : weights) {
      if (x < w) return i;
      x -= w;
      ++i;
    }
    return weights.size() - 1;
  }

 private:
  std::mt19937_64 engine_;
};

// What the model knows to be wrong with a request: each defect, and the code
// kad.proto gives it.
class Defects {
 public:
  void add(StatusCode code, std::string why) { items_.push_back({code, std::move(why)}); }
  // A code the reply may carry without the request being wrong: NOT_FOUND
  // for a handle the model cannot tell exists.
  void tolerate(StatusCode code) { tolerated_.push_back(code); }
  void append(const Defects& other) {
    items_.insert(items_.end(), other.items_.begin(), other.items_.end());
    tolerated_.insert(tolerated_.end(), other.tolerated_.begin(), other.tolerated_.end());
  }
  bool empty() const { return items_.empty(); }
  // Why the first defect is one ("" if none): names a kind of finding.
  const std::string& first() const {
    static const std::string none;
    return items_.empty() ? none : items_.front().second;
  }
  bool allows(int code) const {
    for (const auto& [c, why] : items_)
      if (static_cast<int>(c) == code) return true;
    for (StatusCode c : tolerated_)
      if (static_cast<int>(c) == code) return true;
    return false;
  }
  std::string text() const {
    std::string out;
    for (const auto& [c, why] : items_)
      out += (out.empty() ? "" : "; ") + why + " (" + code_name(c) + ")";
    return out;
  }

 private:
  std::vector<std::pair<StatusCode, std::string>> items_;
  std::vector<StatusCode> tolerated_;
};

// ---- the model of a session ----------------------------------------------

enum class Kind { kBuffer, kQueue, kModule, kKernel };

struct BufferModel {
  uint64_t size = 0;
  bool zeroed = true;  // nothing has written to it: reads must return zeros
};

struct QueueModel {
  uint64_t last_event = 0;  // the highest event a reply gave
  // Launches whose reply was lost (a cancelled stream) or is still to come:
  // events up to last_event + these may exist.
  uint64_t unanswered_launches = 0;
};

struct ModuleModel {
  const Program* program = nullptr;  // nullptr: garbage bytes
  bool ir = false;
  bool intact = true;  // false: IR with flipped bits, cut or grown; what it holds is unknown
  std::string digest;
  std::string what;  // how the fuzzer made it, for reports
};

struct KernelModel {
  v1::GetKernelRequest request;
  ModuleModel module;
  const Entry* entry = nullptr;  // nullptr: the program has no such entry (or it is unknown)
  bool signature_matches = false;
  bool options_allowed = true;  // every build option is on kad.proto's allow-list
  bool options_define_x = false;
  bool options_plain = true;  // allowed options that cannot make a correct kernel fail
};

struct SessionModel {
  std::unique_ptr<WireSession> wire;
  int ordinal = 0;  // the fuzzer's count of sessions opened: "s3" in reports
  std::map<uint64_t, BufferModel> buffers;
  std::map<uint64_t, QueueModel> queues;
  std::map<uint64_t, ModuleModel> modules;
  std::map<uint64_t, KernelModel> kernels;
  std::vector<uint64_t> freed_buffers;
  // Kinds of object a lost reply (a cancelled create, a free that failed)
  // may have left unknown to the model: no handle of theirs is known to be
  // unknown.
  std::set<Kind> uncertain;

  uint64_t buffer_bytes() const {
    uint64_t total = 0;
    for (const auto& [h, b] : buffers) total += b.size;
    return total;
  }
};

bool has(const SessionModel& s, Kind kind, uint64_t handle);
// Whether the session surely has no object of `kind` with `handle`.
bool surely_unknown(const SessionModel& s, Kind kind, uint64_t handle);
// Adds the defect of naming a handle the session does not have, or tolerates
// NOT_FOUND where the model cannot tell.
void unknown_handle_defect(const SessionModel& s, Kind kind, uint64_t handle, const char* why,
                           Defects* d);
std::vector<uint64_t> handles(const SessionModel& s, Kind kind);

// The session a request names, and what is wrong with that naming.
struct Target {
  SessionModel* session;                // whose handles the request uses
  std::optional<std::string> metadata;  // the "kad-session" value; nullopt: none
  Defects session_defects;              // empty: a live session of the fuzzer's
  std::string label;                    // "s3", "no session", ...: prefixes reports
  bool live() const { return session_defects.empty(); }
  // `request`, said to be in this target's session.
  std::string in(const std::string& request) const { return "[" + label + "] " + request; }
};

// ---- sizes -----------------------------------------------------------------

// What a launch ndrange is drawn to be.
enum class SizeClass { kCheap, kRefused, kHuge };

bool is_identifier(const std::string& s);
// Whether a static size and a launch's are the same once normalised as
// DESIGN §3 compares them.
bool same_ndrange(const v1::NdRange& a, const v1::NdRange& b);
bool same_workgroup(const v1::Workgroup& a, const v1::Workgroup& b);
// Adds the defects of sizes as a request gives them ("the ndrange" is `what`).
void ndrange_defects(const v1::NdRange& r, const char* what, Defects* d);
void workgroup_defects(const v1::Workgroup& w, const char* what, Defects* d);
long double product(const google::protobuf::RepeatedField<int64_t>& values);

// Whether `code` starts as a module of `format` must (SPIR-V or LLVM bitcode).
bool has_ir_magic(v1::ModuleFormat format, const std::string& code);

// ---- build options -----------------------------------------------------------

struct BuildOption {
  const char* text;
  bool allowed;    // on kad.proto's allow-list
  bool defines_x;  // defines X, which the needs_define program uses
  bool plain;      // cannot make a correct kernel fail to build
};

// Allowed and hostile options, each a whole option (with its value).
const std::vector<BuildOption>& build_options();

// `text`, cut to its first `keep` characters.
inline std::string cut(const std::string& text, size_t keep = 200) {
  return text.size() <= keep ? text : text.substr(0, keep) + "...";
}

}  // namespace kad::api_fuzz
