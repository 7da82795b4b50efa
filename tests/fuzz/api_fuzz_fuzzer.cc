#include "tests/fuzz/api_fuzz_fuzzer.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "gtest/gtest.h"

namespace kad::api_fuzz {
namespace {

std::string last_lines(const std::string& text, int count) {
  size_t at = text.size();
  for (int i = 0; i <= count && at != std::string::npos && at > 0; ++i)
    at = text.rfind('\n', at - 1);
  return at == std::string::npos ? text : text.substr(at + 1);
}

}  // namespace

Fuzzer::Fuzzer(testing::Daemon& daemon, uint64_t seed, Clock::time_point end)
    : daemon_(daemon),
      seed_(seed),
      end_(end),
      rng_(seed),
      connection_(daemon.unix_uri()),
      session_lifetime_(std::chrono::duration_cast<seconds>(end - Clock::now()) + seconds(120)) {
  beat();
}

std::string Fuzzer::replay_report() const {
  return "replay with KAD_API_FUZZ_SEED=" + std::to_string(seed_) + " (operation #" +
         std::to_string(operation_) + ")\nlast operations:\n" + journal_.dump() +
         "kad's last log lines:\n" + last_lines(daemon_.log(), 30);
}

// ---- checks ------------------------------------------------------------------

void Fuzzer::violation(const std::string& rule, Call call, const std::string& detail, bool fatal) {
  ++violations_;
  if (fatal) stopped_ = true;
  // One report per rule and call: the run goes on to find other kinds.
  if (!reported_.insert(rule + " / " + std::string(call_name(call))).second && !fatal) return;
  ADD_FAILURE() << "kad API fuzz: " << rule << "\n  call:    " << call_name(call) << "\n"
                << detail << "\n"
                << replay_report();
}

void Fuzzer::check(Call call, const std::string& request, int code, const std::string& message,
                   const Defects& defects, bool exact, bool cancelled, Clock::duration elapsed,
                   const std::string& context) {
  ++requests_;
  last_call_ = call;
  journal_.add("#" + std::to_string(operation_) + " " + std::string(call_name(call)) + " " +
               cut(request, 300) + " -> " + code_name(code) +
               (message.empty() ? "" : ": " + cut(message, 160)));
  const std::string detail = "  request: " + cut(request, 600) + "\n  reply:   " + code_name(code) +
                             ": " + cut(message, 600) +
                             (defects.empty() ? "" : "\n  known defects: " + defects.text()) +
                             (context.empty() ? "" : "\n  " + context);
  if (stopped_) return;
  // A transport error may be kad's death: that, not the code, is the finding.
  // Its socket closes before the process is gone: give it a moment.
  if (code != 0) {
    for (int i = code == static_cast<int>(StatusCode::UNAVAILABLE) ? 25 : 1; i > 0 && !stopped_;
         --i) {
      check_alive();
      if (i > 1 && !stopped_) std::this_thread::sleep_for(milliseconds(20));
    }
    if (stopped_) return;
  }
  if (cancelled && code == static_cast<int>(StatusCode::CANCELLED)) return;
  if (code == static_cast<int>(StatusCode::DEADLINE_EXCEEDED) &&
      elapsed >= kRequestDeadline - seconds(1)) {
    // Fatal unless kad still serves a fresh session (checked after the operation).
    violation("no reply within the request deadline (a hang)", call, detail, false);
    hang_seen_ = true;
    return;
  }
  // Each rule names the code or defect, so that each kind is reported once.
  if (code < 0 || code > 16 || !documented(call, static_cast<StatusCode>(code))) {
    violation("a code kad.proto does not document for this call: " + code_name(code), call, detail,
              false);
  }
  if (code != 0 && message.empty())
    violation("a refusal with an empty message", call, detail, false);
  if (code == 0 && !defects.empty())
    violation("accepted a request that must be refused: " + defects.first(), call, detail, false);
  if (code != 0 && exact && !defects.empty() && !defects.allows(code)) {
    violation("refused with another code than kad.proto gives: " + code_name(code), call, detail,
              false);
  }
}

void Fuzzer::check_alive() {
  std::string how;
  if (child_alive(daemon_.pid(), &how)) return;
  violation("kad died (" + how + ")", last_call_,
            "  during operation #" + std::to_string(operation_), true);
}

template <typename Request, typename Response>
grpc::Status Fuzzer::unary(grpc::Status (v1::Kad::Stub::*method)(grpc::ClientContext*,
                                                                 const Request&, Response*),
                           const Target& t, const Request& request, Response* response, bool cancel,
                           Clock::duration* elapsed) {
  auto context = request_context(t.metadata);
  const auto started = Clock::now();
  grpc::Status status;
  if (cancel) {
    DelayedCancel canceller(*context, std::chrono::microseconds(rng_.below(3000)));
    status = (connection_.stub().*method)(context.get(), request, response);
  } else {
    status = (connection_.stub().*method)(context.get(), request, response);
  }
  *elapsed = Clock::now() - started;
  return status;
}

// ---- choosing values -----------------------------------------------------------

uint64_t Fuzzer::pick_handle(const SessionModel& s, Kind kind) {
  const std::vector<uint64_t> own = handles(s, kind);
  if (!own.empty() && rng_.chance(0.85)) return rng_.pick(own);
  switch (rng_.below(6)) {
    case 0:
      return 0;
    case 1:
      return UINT64_MAX;
    case 2: {  // a handle of another kind
      const std::vector<uint64_t> other =
          handles(s, static_cast<Kind>((static_cast<int>(kind) + 1 + rng_.below(3)) % 4));
      if (!other.empty()) return rng_.pick(other);
      return 1;
    }
    case 3: {  // another session's
      const SessionModel& o = any_session();
      const std::vector<uint64_t> theirs = handles(o, kind);
      if (!theirs.empty()) return rng_.pick(theirs);
      return 2;
    }
    case 4:
      if (kind == Kind::kBuffer && !s.freed_buffers.empty()) return rng_.pick(s.freed_buffers);
      return 3;
    default:
      return rng_.pick<uint64_t>({4, 1000, uint64_t{1} << 32, uint64_t{1} << 63, rng_.bits()});
  }
}

// An offset for `length` bytes in a buffer of `size`: mostly inside, else at
// or past its end, or near 2^64.
uint64_t Fuzzer::pick_offset(uint64_t size, uint64_t length) {
  if (rng_.chance(0.55)) return size > length ? rng_.below(size - length + 1) : 0;
  return rng_.pick<uint64_t>({0, 1, size - length, size - length + 1, size, size + 1,
                              uint64_t{1} << 32, uint64_t{1} << 63, UINT64_MAX,
                              UINT64_MAX - length + 1, UINT64_MAX - 3});
}

uint64_t Fuzzer::pick_copy_length(uint64_t size) {
  switch (rng_.weighted({10, 50, 15, 10, 8, 7})) {
    case 0:
      return 0;
    case 1:
      return 1 + rng_.below(std::min<uint64_t>(std::max<uint64_t>(size, 1), 4096));
    case 2:
      return size;
    case 3:
      return rng_.pick<uint64_t>({1, 3, 4, 64, 4096});
    case 4:
      return rng_.pick<uint64_t>({kMaxChunk, kMaxChunk + 1, 3 * kMaxChunk / 2});
    default:
      return rng_.pick<uint64_t>({uint64_t{1} << 32, uint64_t{1} << 63, UINT64_MAX});
  }
}

std::string Fuzzer::random_bytes(size_t n) {
  if (n > random_pool_.size()) return std::string(n, 'x');
  return random_pool_.substr(rng_.below(random_pool_.size() - n + 1), n);
}

std::string Fuzzer::pick_device_id(bool* bogus) {
  *bogus = false;
  switch (rng_.weighted({80, 8, 12})) {
    case 0:
      return "";
    case 1:
      return device_.id;
    default:
      *bogus = true;
      return rng_.pick<std::string>({"cuda:9", "opencl:pocl:1", "opencl:pocl:-1", " ",
                                     device_.id + " ", "opencl:pocl:0\n", std::string(3000, 'd'),
                                     std::string("opencl\0pocl", 11), "../../dev/mem"});
  }
}

uint64_t Fuzzer::scalar_bits() {
  return rng_.pick<uint64_t>({0, 1, 7, 0x3f800000 /* 1.0f */, 0x7fc00000 /* NaN */,
                              uint64_t{1} << 31, UINT32_MAX, uint64_t{1} << 63, UINT64_MAX,
                              rng_.bits()});
}

v1::NdRange Fuzzer::make_ndrange(SizeClass c) {
  constexpr int64_t kBig = int64_t{1} << 40;
  v1::NdRange r;
  if (c == SizeClass::kHuge) {
    static const std::vector<std::vector<int64_t>> huge = {
        {int64_t{1} << 31, int64_t{1} << 31},
        {int64_t{1} << 45},
        {kBig, 1 << 10},
        {1 << 15, 1 << 15, 1 << 15},
        {int64_t{1} << 31, int64_t{1} << 31, 1, 1},
        {int64_t{1} << 62},
        {1 << 20, 1 << 20, 1 << 20},
        {(int64_t{1} << 31) - 1, (int64_t{1} << 31) - 1}};
    for (int64_t e : rng_.pick(huge)) r.add_extents(e);
    return r;
  }
  const int rank = static_cast<int>(rng_.weighted({5, 35, 25, 20, 4, 3, 3, 3, 2}));
  const bool empty = rank > 0 && rng_.chance(0.12);
  const int zero_dim = empty ? static_cast<int>(rng_.below(static_cast<uint64_t>(rank))) : -1;
  int64_t budget = kCheapItems;
  for (int d = 0; d < rank; ++d) {
    int64_t e;
    if (d == zero_dim) {
      e = 0;
    } else if (empty && rng_.chance(0.5)) {
      e = rng_.pick<int64_t>({1, 7, int64_t{1} << 31, kBig, INT64_MAX});
    } else {
      e = rng_.pick<int64_t>({1, 1, 2, 3, 4, 5, 7, 8, 16, 33, 37, 64});
      if (e > budget) e = 1;
      budget /= e;
    }
    r.add_extents(e);
  }
  if (rng_.chance(0.15)) {
    for (int d = 0; d < rank; ++d)
      r.add_offsets(
          rng_.pick<int64_t>({0, 0, 1, -1, -2, 3, 1000, -(int64_t{1} << 31), kBig, INT64_MIN}));
  }
  if (c == SizeClass::kRefused) {
    switch (rng_.below(4)) {
      case 0:  // a negative extent
        if (r.extents_size() == 0) r.add_extents(1);
        r.set_extents(static_cast<int>(rng_.below(static_cast<uint64_t>(r.extents_size()))),
                      rng_.pick<int64_t>({-1, -3, -kBig, INT64_MIN}));
        break;
      case 1:  // more than 8 dimensions
        r.clear_offsets();
        while (r.extents_size() < 9 + static_cast<int>(rng_.below(4))) r.add_extents(1);
        break;
      case 2:  // offsets that do not match the extents
        r.clear_offsets();
        for (int d = 0; d <= r.extents_size(); ++d) r.add_offsets(d);
        break;
      default: {  // more than 2^63 - 1 work-items
        static const std::vector<std::vector<int64_t>> overflow = {
            {kBig, kBig},
            {INT64_MAX, 2},
            {int64_t{1} << 32, int64_t{1} << 32, int64_t{1} << 32},
            {1 << 21, 1 << 21, 1 << 21, 2}};
        r.clear_extents();
        r.clear_offsets();
        for (int64_t e : rng_.pick(overflow)) r.add_extents(e);
        break;
      }
    }
  }
  return r;
}

v1::Workgroup Fuzzer::make_workgroup(SizeClass c) {
  v1::Workgroup w;
  if (c == SizeClass::kCheap) {
    int64_t budget = kCheapItems;
    const int rank = static_cast<int>(rng_.weighted({5, 45, 30, 20}));
    for (int d = 0; d < rank; ++d) {
      int64_t s = rng_.pick<int64_t>({0, 1, 1, 2, 3, 4, 8, 16, 32, 64});
      if (s > budget) s = 1;
      budget /= std::max<int64_t>(s, 1);
      w.add_sizes(s);
    }
    return w;
  }
  static const std::vector<std::vector<int64_t>> refused = {
      {-1},        {4, -4},
      {INT64_MIN}, {8192},
      {4096, 2},   {1 << 20},
      {INT64_MAX}, {int64_t{1} << 32, int64_t{1} << 32},
      {4097},      {1, 1, 1, 1, 1, 1, 1, 1, 1}};
  for (int64_t s : rng_.pick(refused)) w.add_sizes(s);
  return w;
}

std::string Fuzzer::make_build_options(KernelModel* k) {
  const std::vector<BuildOption>& all = build_options();
  std::vector<const BuildOption*> chosen;
  switch (rng_.weighted({65, 20, 15})) {
    case 0:
      break;
    case 1:  // one allowed option
      do chosen = {&rng_.pick(all)};
      while (!chosen[0]->allowed);
      break;
    default:
      for (uint64_t n = 1 + rng_.below(3); n > 0; --n) chosen.push_back(&rng_.pick(all));
      break;
  }
  std::string text;
  for (const BuildOption* o : chosen) {
    text += (text.empty() ? "" : " ") + std::string(o->text);
    k->options_allowed = k->options_allowed && o->allowed;
    k->options_define_x = k->options_define_x || o->defines_x;
    k->options_plain = k->options_plain && o->plain;
  }
  if (rng_.chance(0.03)) {  // over kad.proto's 4096 bytes
    text.clear();
    while (text.size() <= 4096) text += "-w ";
    k->options_allowed = false;
    k->options_plain = false;
  }
  return text;
}

v1::ArgSpec Fuzzer::random_arg_spec() {
  v1::ArgSpec a;
  a.set_kind(static_cast<v1::ArgKind>(rng_.chance(0.9) ? rng_.pick<int>({1, 1, 2, 3, 3, 3, 4})
                                                       : rng_.pick<int>({0, 5, 99, -1})));
  if (a.kind() == v1::ARG_KIND_SCALAR || rng_.chance(0.1))
    a.set_scalar(static_cast<v1::ScalarType>(
        rng_.pick<int>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 5, 6, 10, 0, 12, 99, -7})));
  return a;
}

// ---- operations ------------------------------------------------------------------

bool Fuzzer::setup() {
  // Random bytes to cut data and garbage modules from.
  random_pool_.resize(2 * kMaxChunk + 64);
  for (char& c : random_pool_) c = static_cast<char>(rng_.bits());
  v1::ListDevicesResponse devices;
  Clock::duration elapsed;
  const grpc::Status s = unary(&v1::Kad::Stub::ListDevices, Target{nullptr, std::nullopt, {}, ""},
                               v1::ListDevicesRequest(), &devices, false, &elapsed);
  for (const v1::Device& d : devices.devices()) {
    if (!d.is_default()) continue;
    device_.id = d.id();
    device_.max_workgroup_size = d.limits().max_workgroup_size();
    device_.local_memory_bytes = d.limits().local_memory_bytes();
    device_.max_allocation_bytes = d.limits().max_allocation_bytes();
  }
  if (!s.ok() || device_.id.empty()) {
    ADD_FAILURE() << "ListDevices found no default device: " << s.error_message();
    return false;
  }
  ir_ = build_ir_modules(programs()[0]);
  std::printf("kad API fuzz: device %s; IR modules: bitcode %s, SPIR-V %s\n", device_.id.c_str(),
              ir_.bitcode ? "built" : "unavailable", ir_.spirv ? "built" : "unavailable");
  return true;
}

void Fuzzer::run() {
  if (!setup()) return;
  while (!stopped_ && Clock::now() < end_) {
    ++operation_;
    beat();
    step();
    if (!stopped_) check_alive();
    if (!stopped_ && (hang_seen_ || operation_ % kOperationsPerBatch == 0)) check_daemon_serves();
    hang_seen_ = false;
  }
  if (!stopped_) finish();
}

void Fuzzer::step() {
  if (sessions_.empty()) return open_session();
  const double open_weight = sessions_.size() < 2 ? 6 : sessions_.size() < kOwnSessions ? 1.5 : 0;
  SessionModel& s = any_session();
  const Target t = live_target(s);
  // The operations' weights, in the order of the cases.
  switch (rng_.weighted({open_weight, 1.5, 0.7, 0.15, 1, 1, 4, 10, 4, 6, 6, 7, 12, 3, 30})) {
    case 0:
      return open_session();
    case 1:
      return close_session(rng_.below(sessions_.size()));
    case 2:
      return close_session_under_stream();
    case 3:
      return flood_sessions();
    case 4:
      return list_devices();
    case 5:
      return get_status();
    case 6:
      return call_without_session();
    case 7:
      return s.buffers.size() < 40 ? allocate_buffer(t) : free_buffer(t);
    case 8:
      return free_buffer(t);
    case 9:
      return write_buffer(t);
    case 10:
      return read_buffer(t);
    case 11:
      return s.modules.size() < 24 ? load_module(t) : close_session(rng_.below(sessions_.size()));
    case 12:
      return s.kernels.size() < 48 ? get_kernel(t) : close_session(rng_.below(sessions_.size()));
    case 13:
      return s.queues.size() < 4 ? create_queue(t) : submit(t);
    default:  // a session with no queue mostly gets one first
      return s.queues.empty() && rng_.chance(0.7) ? create_queue(t) : submit(t);
  }
}

void Fuzzer::open_session() {
  const std::string name = rng_.pick<std::string>(
      {"api-fuzz", "", std::string(2000, 'n'), std::string("nul\0name", 8), "ünïcödé", "../x"});
  const auto started = Clock::now();
  WireSession::Opened opened = WireSession::open(connection_.stub(), name, session_lifetime_);
  check(Call::kOpenSession, "client_name: \"" + cut(name, 40) + "\"", opened.status.error_code(),
        opened.status.error_message(), {}, false, false, Clock::now() - started);
  if (!opened.session) return;
  const std::string& id = opened.session->id();
  if (id.empty() || !seen_session_ids_.insert(id).second) {
    violation("a session id that is empty or was given before", Call::kOpenSession,
              "  id: \"" + id + "\"", false);
  }
  auto s = std::make_unique<SessionModel>();
  s->wire = std::move(opened.session);
  s->ordinal = ++sessions_opened_;
  journal_.add("#" + std::to_string(operation_) + " opened session s" + std::to_string(s->ordinal) +
               " " + id);
  sessions_.push_back(std::move(s));
}

void Fuzzer::close_session(size_t index) {
  const std::string id = sessions_[index]->wire->id();
  const int ordinal = sessions_[index]->ordinal;
  sessions_[index]->wire->close();
  sessions_.erase(sessions_.begin() + static_cast<std::ptrdiff_t>(index));
  closed_sessions_.push_back({id, false});
  if (closed_sessions_.size() > 8) closed_sessions_.pop_front();
  journal_.add("#" + std::to_string(operation_) + " closed session s" + std::to_string(ordinal) +
               " " + id);
}

// A Submit stream outliving its session: kad.proto says it sends a last
// reply (tag 0, ABORTED) and ends, CANCELLED.
void Fuzzer::close_session_under_stream() {
  const size_t index = rng_.below(sessions_.size());
  SessionModel& s = *sessions_[index];
  if (s.queues.empty()) return close_session(index);
  const std::string id = s.wire->id();
  const uint64_t queue = rng_.pick(handles(s, Kind::kQueue));
  const uint64_t kernel = pick_handle(s, Kind::kKernel);
  const uint64_t buffer = pick_handle(s, Kind::kBuffer);
  auto context = request_context(id);
  const auto started = Clock::now();
  auto stream = connection_.stub().Submit(context.get());
  v1::QueueCommand ping;
  ping.set_queue(queue);
  ping.set_tag(1);
  ping.mutable_ping();
  v1::QueueReply reply;
  // Checks a reply to `c`, a command of `call`, read after the session closed.
  auto check_late_reply = [&](const v1::QueueCommand& c, Call call) {
    if (reply.tag() == 0) {  // the stream's last reply: the session closed
      check(Call::kSubmit, "the last reply after its session closed", reply.code(), reply.message(),
            {}, false, false, {});
      return;
    }
    if (reply.tag() != c.tag()) {
      violation("a reply with another tag than its command", call,
                "  request: " + brief_text(c) + "\n  reply:   " + brief_text(reply), false);
    }
    check(call, brief_text(c) + " (its session closed)", reply.code(), reply.message(), {}, false,
          false, {});
  };
  const bool pinged = stream->Write(ping) && stream->Read(&reply);
  if (pinged)
    check(Call::kPing, brief_text(ping), reply.code(), reply.message(), {}, false, false, {});
  close_session(index);
  if (!pinged) {
    while (stream->Read(&reply)) check_late_reply(ping, Call::kPing);
    const grpc::Status st = stream->Finish();
    check(Call::kSubmit, "a ping on queue " + std::to_string(queue), st.error_code(),
          st.error_message(), {}, false, false, Clock::now() - started);
    return;
  }

  await_session_gone(id);

  // Every command now must find the stream ended; allow kad a second.
  bool ended = false;
  std::string last_answer;
  for (const auto give_up = Clock::now() + seconds(1); !ended && Clock::now() < give_up;) {
    v1::QueueCommand c;
    c.set_tag(reply.tag() + 1);
    Call call;
    switch (rng_.below(3)) {
      case 0:
        call = Call::kPing;
        c.mutable_ping();
        break;
      case 1:
        call = Call::kLaunch;
        c.mutable_launch()->set_kernel(kernel);
        c.mutable_launch()->mutable_ndrange()->add_extents(1);
        break;
      default:
        call = Call::kCopyOut;
        c.mutable_copy_out()->set_buffer(buffer);
        c.mutable_copy_out()->set_size(4);
        break;
    }
    journal_.add("#" + std::to_string(operation_) +
                 " Submit after its session closed: " + brief_text(c));
    // A write fails once kad has ended the stream; what it sent before still
    // waits to be read (and must be, before Finish can return).
    const bool written = stream->Write(c);
    ended = true;
    while (stream->Read(&reply)) {
      check_late_reply(c, call);
      last_answer = brief_text(c) + " -> " + brief_text(reply);
      if (written) {
        ended = false;
        break;
      }
    }
    if (!ended) std::this_thread::sleep_for(milliseconds(50));
  }
  if (!ended) {
    violation("a Submit stream still answers commands 1 s after its session closed", Call::kSubmit,
              "  session " + id + "; last answer: " + cut(last_answer, 400), false);
    stream->WritesDone();
    while (stream->Read(&reply)) {
    }
  }
  const grpc::Status st = stream->Finish();
  // A stream on a thread ends cancelled (kad cancels it: gRPC sends no
  // status then); a reactor's ends as its last reply said.
  Defects closed;
  if (ended) {
    closed.add(StatusCode::CANCELLED, "its session closed");
    closed.add(StatusCode::ABORTED, "its session closed");
  }
  check(Call::kSubmit, "the stream of closed session " + id, st.error_code(), st.error_message(),
        closed, ended, false, Clock::now() - started);
}

// kad reclaims a closed session asynchronously, once it sees the session
// stream's cancel: wait until the id names none (a 0-byte allocation in a live
// session is INVALID_ARGUMENT instead). Until then a call naming it may still
// be served, or end with the session mid-call.
void Fuzzer::await_session_gone(const std::string& id) {
  v1::AllocateBufferRequest probe;
  Defects live_or_gone;
  live_or_gone.add(StatusCode::INVALID_ARGUMENT, "0 bytes");
  live_or_gone.add(StatusCode::NOT_FOUND, "the session closed");
  for (const auto give_up = Clock::now() + seconds(5);;) {
    v1::AllocateBufferResponse response;
    Clock::duration elapsed;
    const grpc::Status st =
        unary(&v1::Kad::Stub::AllocateBuffer, Target{nullptr, id, {}, "closed session"}, probe,
              &response, false, &elapsed);
    check(Call::kAllocateBuffer, "size: 0 (in a session just closed)", st.error_code(),
          st.error_message(), live_or_gone, true, false, elapsed);
    if (st.error_code() == StatusCode::NOT_FOUND || stopped_) break;
    if (Clock::now() > give_up) {
      violation("a closed session still serves requests 5 s later", Call::kAllocateBuffer,
                "  session " + id, false);
      break;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  for (ClosedSession& closed : closed_sessions_)
    if (closed.id == id) closed.gone = true;
}

// More sessions than kad serves at once: the extra ones are refused.
void Fuzzer::flood_sessions() {
  std::vector<std::unique_ptr<WireSession>> extra;
  while (extra.size() < kDaemonMaxSessions + 2) {
    const auto started = Clock::now();
    WireSession::Opened opened =
        WireSession::open(connection_.stub(), "api-fuzz-flood", session_lifetime_);
    check(Call::kOpenSession, "client_name: \"api-fuzz-flood\"", opened.status.error_code(),
          opened.status.error_message(), {}, false, false, Clock::now() - started);
    if (!opened.session) break;
    extra.push_back(std::move(opened.session));
    if (sessions_.size() + extra.size() > kDaemonMaxSessions) {
      violation("served more sessions at once than --max-sessions", Call::kOpenSession,
                "  " + std::to_string(sessions_.size() + extra.size()) + " open, the maximum is " +
                    std::to_string(kDaemonMaxSessions),
                false);
      break;
    }
  }
  journal_.add("#" + std::to_string(operation_) + " opened " + std::to_string(extra.size()) +
               " extra sessions, closing them");
}

void Fuzzer::list_devices() {
  Target t{nullptr, std::nullopt, {}, ""};
  if (rng_.chance(0.5))
    t.metadata = rng_.pick<std::string>({"", "garbage", any_session().wire->id()});
  const bool cancel = rng_.chance(0.1);
  v1::ListDevicesResponse response;
  Clock::duration elapsed;
  const grpc::Status s =
      unary(&v1::Kad::Stub::ListDevices, t, v1::ListDevicesRequest(), &response, cancel, &elapsed);
  check(Call::kListDevices, "{}", s.error_code(), s.error_message(), {}, false, cancel, elapsed);
}

void Fuzzer::get_status() {
  Target t{nullptr, std::nullopt, {}, ""};
  if (rng_.chance(0.5))
    t.metadata = rng_.pick<std::string>({"", "garbage", any_session().wire->id()});
  const bool cancel = rng_.chance(0.1);
  v1::GetStatusResponse response;
  Clock::duration elapsed;
  const grpc::Status s =
      unary(&v1::Kad::Stub::GetStatus, t, v1::GetStatusRequest(), &response, cancel, &elapsed);
  check(Call::kGetStatus, "{}", s.error_code(), s.error_message(), {}, false, cancel, elapsed);
  if (s.ok() && response.sessions() > kDaemonMaxSessions) {
    violation("GetStatus counts more sessions than --max-sessions", Call::kGetStatus,
              "  " + brief_text(response), false);
  }
}

// A session call naming no session, a closed one or one that never was.
void Fuzzer::call_without_session() {
  Target t{&any_session(), std::nullopt, {}, "no session"};
  switch (rng_.below(5)) {
    case 0:
      t.session_defects.add(StatusCode::FAILED_PRECONDITION, "no kad-session metadata");
      break;
    case 1:  // present but empty: kad.proto's wording fits either code
      t.label = "empty session id";
      t.metadata = "";
      t.session_defects.add(StatusCode::FAILED_PRECONDITION, "an empty kad-session");
      t.session_defects.add(StatusCode::NOT_FOUND, "an empty kad-session");
      break;
    case 2:
      if (closed_sessions_.empty()) {
        t.metadata = "0123456789abcdef0123456789abcdef";
      } else {
        ClosedSession& closed = closed_sessions_[rng_.below(closed_sessions_.size())];
        if (!closed.gone) await_session_gone(closed.id);
        t.metadata = closed.id;
      }
      t.label = "closed session";
      t.session_defects.add(StatusCode::NOT_FOUND, "a closed session");
      break;
    case 3: {
      std::string id;
      for (int i = 0; i < 32; ++i) id += "0123456789abcdef"[rng_.below(16)];
      t.metadata = id;
      t.label = "unknown session";
      t.session_defects.add(StatusCode::NOT_FOUND, "a session id that never was");
      break;
    }
    default:
      t.metadata =
          rng_.pick<std::string>({"x", "' OR 1=1 --", std::string(1000, 'a'),
                                  t.session->wire->id() + "0", t.session->wire->id().substr(1)});
      t.label = "garbage session id";
      t.session_defects.add(StatusCode::NOT_FOUND, "a garbage session id");
      break;
  }
  switch (rng_.below(8)) {
    case 0:
      return allocate_buffer(t);
    case 1:
      return free_buffer(t);
    case 2:
      return write_buffer(t);
    case 3:
      return read_buffer(t);
    case 4:
      return load_module(t);
    case 5:
      return get_kernel(t);
    case 6:
      return create_queue(t);
    default:
      return submit(t);
  }
}

void Fuzzer::allocate_buffer(const Target& t) {
  SessionModel& s = *t.session;
  v1::AllocateBufferRequest r;
  bool bogus_device;
  r.set_device_id(pick_device_id(&bogus_device));
  switch (rng_.weighted({60, 12, 28})) {
    case 0:
      r.set_size(1 + rng_.below(4096));
      break;
    case 1:
      r.set_size(4097 + rng_.below(3 * kMaxChunk));
      break;
    default:
      r.set_size(
          rng_.pick<uint64_t>({0, kSessionMemoryQuota, kSessionMemoryQuota + 1,
                               device_.max_allocation_bytes, device_.max_allocation_bytes + 1,
                               uint64_t{1} << 40, uint64_t{1} << 63, UINT64_MAX - 1, UINT64_MAX}));
      break;
  }
  Defects d = t.session_defects;
  if (t.live()) {
    if (r.size() == 0) d.add(StatusCode::INVALID_ARGUMENT, "0 bytes");
    if (bogus_device) d.add(StatusCode::NOT_FOUND, "an unknown device");
    if (r.size() > device_.max_allocation_bytes)
      d.add(StatusCode::RESOURCE_EXHAUSTED, "over the device's largest allocation");
    if (s.uncertain.count(Kind::kBuffer) == 0 &&
        r.size() > kSessionMemoryQuota - std::min(kSessionMemoryQuota, s.buffer_bytes()))
      d.add(StatusCode::RESOURCE_EXHAUSTED, "over the session's memory quota");
  }
  v1::AllocateBufferResponse response;
  Clock::duration elapsed;
  const grpc::Status st = unary(&v1::Kad::Stub::AllocateBuffer, t, r, &response, false, &elapsed);
  check(Call::kAllocateBuffer, t.in(brief_text(r)), st.error_code(), st.error_message(), d,
        !t.live(), false, elapsed);
  if (!st.ok() || !t.live()) return;
  if (has(s, Kind::kBuffer, response.buffer()) || has(s, Kind::kQueue, response.buffer()) ||
      has(s, Kind::kModule, response.buffer()) || has(s, Kind::kKernel, response.buffer())) {
    violation("a new buffer has the handle of a live object", Call::kAllocateBuffer,
              "  handle " + std::to_string(response.buffer()), false);
  }
  s.buffers[response.buffer()] = {r.size(), true};
}

void Fuzzer::free_buffer(const Target& t) {
  SessionModel& s = *t.session;
  v1::FreeBufferRequest r;
  r.set_buffer(pick_handle(s, Kind::kBuffer));
  Defects d = t.session_defects;
  if (t.live()) unknown_handle_defect(s, Kind::kBuffer, r.buffer(), "an unknown buffer", &d);
  v1::FreeBufferResponse response;
  Clock::duration elapsed;
  const grpc::Status st = unary(&v1::Kad::Stub::FreeBuffer, t, r, &response, false, &elapsed);
  check(Call::kFreeBuffer, t.in(brief_text(r)), st.error_code(), st.error_message(), d, true, false,
        elapsed);
  if (!t.live()) return;
  if (st.ok()) {
    s.buffers.erase(r.buffer());
    s.freed_buffers.push_back(r.buffer());
  } else if (st.error_code() != StatusCode::NOT_FOUND &&
             st.error_code() != StatusCode::FAILED_PRECONDITION) {
    s.uncertain.insert(Kind::kBuffer);  // freed or not: the model cannot tell
  }
}

void Fuzzer::write_buffer(const Target& t) {
  SessionModel& s = *t.session;
  const uint64_t queue = pick_handle(s, Kind::kQueue);
  const uint64_t buffer = pick_handle(s, Kind::kBuffer);
  const auto known = s.buffers.find(buffer);
  const uint64_t size = known == s.buffers.end() ? 4096 : known->second.size;
  std::vector<uint64_t> lengths(rng_.weighted({8, 62, 20, 10}));
  uint64_t total = 0;
  for (uint64_t& n : lengths) {
    n = rng_.chance(0.04) ? rng_.pick<uint64_t>({kMaxChunk, kMaxChunk + 1})
                          : rng_.below(std::min<uint64_t>(size, 8192) + 1);
    total += n;
  }
  std::vector<v1::WriteBufferChunk> chunks(lengths.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (i == 0 || rng_.chance(0.2)) {  // kad reads these from the first chunk only
      chunks[i].set_queue(i == 0 ? queue : pick_handle(s, Kind::kQueue));
      chunks[i].set_buffer(i == 0 ? buffer : pick_handle(s, Kind::kBuffer));
      chunks[i].set_offset(i == 0 ? pick_offset(size, total) : rng_.bits());
    }
    chunks[i].set_data(random_bytes(lengths[i]));
  }
  const uint64_t offset = chunks.empty() ? 0 : chunks[0].offset();
  Defects d = t.session_defects;
  if (t.live()) {
    if (chunks.empty()) d.add(StatusCode::INVALID_ARGUMENT, "no chunk");
    for (uint64_t n : lengths) {
      if (n > kMaxChunk) {
        d.add(StatusCode::INVALID_ARGUMENT, "a chunk over 1 MiB");
        break;
      }
    }
    if (!chunks.empty()) {
      unknown_handle_defect(s, Kind::kQueue, queue, "an unknown queue", &d);
      unknown_handle_defect(s, Kind::kBuffer, buffer, "an unknown buffer", &d);
      if (known != s.buffers.end() && (offset > size || total > size - offset))
        d.add(StatusCode::OUT_OF_RANGE, "past the buffer's end");
    }
  }
  const bool cancel = chunks.size() > 1 && rng_.chance(0.1);
  auto context = request_context(t.metadata);
  const auto started = Clock::now();
  v1::WriteBufferResponse response;
  auto writer = connection_.stub().WriteBuffer(context.get(), &response);
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (cancel && i == 1) {
      context->TryCancel();
      break;
    }
    if (!writer->Write(chunks[i])) break;
  }
  if (!cancel) writer->WritesDone();
  const grpc::Status st = writer->Finish();
  std::string text = std::to_string(chunks.size()) + " chunks of " + std::to_string(total) +
                     " bytes" + (cancel ? ", cancelled after the first" : "");
  if (!chunks.empty()) text += "; first " + brief_text(chunks[0]);
  check(Call::kWriteBuffer, t.in(text), st.error_code(), st.error_message(), d, true, cancel,
        Clock::now() - started);
  if (!t.live()) return;
  if (known != s.buffers.end() && total > 0) known->second.zeroed = false;
  if (st.ok() && response.bytes_written() != total) {
    violation("WriteBuffer reports another byte count than it was sent", Call::kWriteBuffer,
              "  " + text + "; bytes_written " + std::to_string(response.bytes_written()), false);
  }
}

void Fuzzer::read_buffer(const Target& t) {
  SessionModel& s = *t.session;
  v1::ReadBufferRequest r;
  r.set_queue(pick_handle(s, Kind::kQueue));
  r.set_buffer(pick_handle(s, Kind::kBuffer));
  const auto known = s.buffers.find(r.buffer());
  const uint64_t size = known == s.buffers.end() ? 4096 : known->second.size;
  r.set_size(pick_copy_length(size));
  r.set_offset(pick_offset(size, r.size()));
  Defects d = t.session_defects;
  if (t.live()) {
    unknown_handle_defect(s, Kind::kQueue, r.queue(), "an unknown queue", &d);
    unknown_handle_defect(s, Kind::kBuffer, r.buffer(), "an unknown buffer", &d);
    if (known != s.buffers.end() && (r.offset() > size || r.size() > size - r.offset()))
      d.add(StatusCode::OUT_OF_RANGE, "past the buffer's end");
  }
  // A read kad should refuse may never end if it does not: stop it past the
  // size asked for.
  const bool cancel_after_first = rng_.chance(0.1);
  auto context = request_context(t.metadata);
  const auto started = Clock::now();
  auto reader = connection_.stub().ReadBuffer(context.get(), r);
  v1::BufferChunk chunk;
  uint64_t received = 0;
  bool zeros = true, oversized_chunk = false, cancelled = false;
  while (reader->Read(&chunk)) {
    received += chunk.data().size();
    oversized_chunk = oversized_chunk || chunk.data().size() > kMaxChunk;
    zeros = zeros &&
            std::all_of(chunk.data().begin(), chunk.data().end(), [](char c) { return c == 0; });
    if (cancel_after_first || received > r.size()) {
      context->TryCancel();
      cancelled = true;
      break;
    }
  }
  const grpc::Status st = reader->Finish();
  check(Call::kReadBuffer, t.in(brief_text(r)), st.error_code(), st.error_message(), d, true,
        cancelled, Clock::now() - started);
  if (received > r.size() || oversized_chunk) {
    violation("ReadBuffer sent more than asked, or a chunk over 1 MiB", Call::kReadBuffer,
              "  " + brief_text(r) + "; received " + std::to_string(received), false);
  }
  if (!st.ok() || !t.live()) return;
  if (received != r.size()) {
    violation("ReadBuffer ended OK with fewer bytes than asked", Call::kReadBuffer,
              "  " + brief_text(r) + "; received " + std::to_string(received), false);
  }
  if (known != s.buffers.end() && known->second.zeroed && !zeros) {
    violation("a buffer nothing wrote to reads back other than zeros", Call::kReadBuffer,
              "  " + brief_text(r), false);
  }
}

void Fuzzer::load_module(const Target& t) {
  SessionModel& s = *t.session;
  v1::LoadModuleRequest r;
  ModuleModel m;
  std::string what;
  auto opencl_program = [&](bool unique) {
    m.program = &programs()[rng_.weighted({60, 15, 10, 15})];
    r.set_format(v1::MODULE_FORMAT_OPENCL_C);
    r.set_code(m.program->source);
    what = m.program->name;
    if (unique) {  // a module no cache holds yet: compiled afresh
      r.mutable_code()->append("\n// " + std::to_string(rng_.bits()) + "\n");
      what += " (made unique)";
    }
  };
  const std::optional<std::string>& ir_code = rng_.chance(0.6) ? ir_.bitcode : ir_.spirv;
  const v1::ModuleFormat ir_format =
      &ir_code == &ir_.bitcode ? v1::MODULE_FORMAT_LLVM_BC_SPIR64 : v1::MODULE_FORMAT_SPIRV;
  const std::string ir_name = &ir_code == &ir_.bitcode ? "LLVM bitcode" : "SPIR-V";
  switch (rng_.weighted({45, 12, 12, 6, 15, 5, 5})) {
    case 0:
      opencl_program(rng_.chance(0.08));
      break;
    case 1:
      if (!ir_code) {
        opencl_program(false);
        break;
      }
      r.set_format(ir_format);
      r.set_code(*ir_code);
      m = {&programs()[0], true, true, "", ""};
      what = "kernels as " + ir_name;
      break;
    case 2: {  // IR with damage a verifier or driver must survive
      if (!ir_code) {
        opencl_program(false);
        break;
      }
      r.set_format(ir_format);
      std::string code = *ir_code;
      switch (rng_.below(3)) {
        case 0:
          for (uint64_t n = 1 + rng_.below(4); n > 0; --n)
            code[rng_.below(code.size())] ^= static_cast<char>(1 << rng_.below(8));
          what = ir_name + " with flipped bits";
          break;
        case 1:
          code.resize(rng_.below(code.size()));
          what = ir_name + " cut short";
          break;
        default:
          code += random_bytes(1 + rng_.below(64));
          what = ir_name + " with bytes appended";
          break;
      }
      r.set_code(code);
      m = {&programs()[0], true, false, "", ""};
      break;
    }
    case 3:  // code of another format than it claims
      r.set_format(rng_.pick({v1::MODULE_FORMAT_SPIRV, v1::MODULE_FORMAT_LLVM_BC_SPIR64}));
      r.set_code(rng_.chance(0.5) && ir_code ? *ir_code : programs()[0].source);
      m = {nullptr, true, false, "", ""};
      what = "code labelled another format";
      break;
    case 4:
      r.set_format(static_cast<v1::ModuleFormat>(
          rng_.pick<int>({0, 1, 2, 3, 4, 5, 6, 7, 99, -1, INT32_MAX, INT32_MIN})));
      r.set_code(random_bytes(1 + rng_.below(rng_.chance(0.1) ? kMaxChunk : 512)));
      m = {nullptr, false, true, "", ""};
      what = "random bytes";
      break;
    case 5:
      r.set_format(static_cast<v1::ModuleFormat>(rng_.pick<int>({1, 2, 3, 4, 5, 6})));
      m = {nullptr, false, true, "", ""};
      what = "no code";
      break;
    default:
      r.set_format(static_cast<v1::ModuleFormat>(rng_.pick<int>({0, 7, 99, -1, INT32_MAX})));
      r.set_code(programs()[0].source);
      m = {nullptr, false, true, "", ""};
      what = "OpenCL C with a format kad.v1 does not have";
      break;
  }
  Defects d = t.session_defects;
  if (t.live()) {
    if (r.format() < 1 || r.format() > 6) d.add(StatusCode::INVALID_ARGUMENT, "an unknown format");
    if (r.code().empty()) d.add(StatusCode::INVALID_ARGUMENT, "no code");
    if ((r.format() == v1::MODULE_FORMAT_SPIRV || r.format() == v1::MODULE_FORMAT_LLVM_BC_SPIR64) &&
        !has_ir_magic(r.format(), r.code()))
      d.add(StatusCode::INVALID_ARGUMENT, "code that is not of its format");
  }
  const bool cancel = rng_.chance(0.05);
  v1::LoadModuleResponse response;
  Clock::duration elapsed;
  const grpc::Status st = unary(&v1::Kad::Stub::LoadModule, t, r, &response, cancel, &elapsed);
  check(Call::kLoadModule, t.in("(" + what + ") " + brief_text(r)), st.error_code(),
        st.error_message(), d, false, cancel, elapsed);
  if (!t.live()) return;
  if (cancel && !st.ok()) s.uncertain.insert(Kind::kModule);
  if (!st.ok()) return;
  if (response.digest().empty())
    violation("LoadModule answered no digest", Call::kLoadModule, "  " + brief_text(r), false);
  m.digest = response.digest();
  m.what = what;
  s.modules[response.module()] = m;
}

void Fuzzer::get_kernel(const Target& t) {
  SessionModel& s = *t.session;
  KernelModel k;
  v1::GetKernelRequest& r = k.request;
  // The module: mostly one whose code the model knows.
  std::vector<uint64_t> known_code;
  for (const auto& [h, m] : s.modules)
    if (m.program && m.intact) known_code.push_back(h);
  r.set_module(!known_code.empty() && rng_.chance(0.7) ? rng_.pick(known_code)
                                                       : pick_handle(s, Kind::kModule));
  const auto module = s.modules.find(r.module());
  if (module != s.modules.end()) k.module = module->second;
  const Program* program = k.module.program;
  // The entry: mostly one the program has.
  if (program && rng_.chance(0.85)) {
    r.set_entry(rng_.pick(program->entries).name);
  } else if (rng_.chance(0.4)) {
    r.set_entry(rng_.pick(rng_.pick(programs()).entries).name);
  } else {
    r.set_entry(rng_.pick<std::string>({"", "nosuch", "fill; rm -rf /", "1fill", "fill\n", "fi ll",
                                        std::string(5000, 'f'), "__kad_ctx", "main", "ünï"}));
  }
  if (program) {
    for (const Entry& e : program->entries)
      if (e.name == r.entry()) k.entry = &e;
  }
  // The signature: the kernel's own, changed a little, or random.
  const uint64_t style = rng_.weighted({60, 20, 20});
  if (k.entry && style < 2) {
    for (const v1::ArgSpec& a : signature_of(*k.entry)) *r.add_args() = a;
    if (style == 1 && r.args_size() > 0) {
      const int at = static_cast<int>(rng_.below(static_cast<uint64_t>(r.args_size())));
      switch (rng_.weighted({1, 2, 1, 1, 1})) {
        case 0:  // one fewer: kad must not reuse a kernel compiled for more
          r.mutable_args()->RemoveLast();
          break;
        case 1: {  // a pointer (mostly) as an 8-byte scalar or local memory, or the other way
          std::vector<int> pointers;
          for (int i = 0; i < r.args_size(); ++i)
            if (r.args(i).kind() != v1::ARG_KIND_SCALAR) pointers.push_back(i);
          v1::ArgSpec& a =
              *r.mutable_args(!pointers.empty() && rng_.chance(0.75) ? rng_.pick(pointers) : at);
          if (a.kind() == v1::ARG_KIND_SCALAR) {
            a.Clear();
            a.set_kind(rng_.pick({v1::ARG_KIND_BUFFER, v1::ARG_KIND_CONST_BUFFER}));
          } else {
            a.set_kind(rng_.pick({v1::ARG_KIND_SCALAR, v1::ARG_KIND_LOCAL}));
            if (a.kind() == v1::ARG_KIND_SCALAR)
              a.set_scalar(
                  rng_.pick({v1::SCALAR_TYPE_U64, v1::SCALAR_TYPE_I64, v1::SCALAR_TYPE_F64}));
          }
          break;
        }
        case 2:
          *r.add_args() = random_arg_spec();
          break;
        case 3:
          *r.mutable_args(at) = random_arg_spec();
          break;
        default:
          r.mutable_args()->SwapElements(0, r.args_size() - 1);
          break;
      }
    } else if (style == 1) {
      *r.add_args() = random_arg_spec();
    }
  } else {
    for (uint64_t n = rng_.below(9); n > 0; --n) *r.add_args() = random_arg_spec();
  }
  if (rng_.chance(0.25)) {
    *r.mutable_static_ndrange() = make_ndrange(static_cast<SizeClass>(rng_.weighted({60, 25, 15})));
  }
  if (rng_.chance(0.2))
    *r.mutable_static_workgroup() =
        make_workgroup(rng_.chance(0.7) ? SizeClass::kCheap : SizeClass::kRefused);
  r.set_build_options(make_build_options(&k));
  k.signature_matches = k.entry && signature_matches(*k.entry, r.args());

  Defects d = t.session_defects;
  if (t.live()) {
    unknown_handle_defect(s, Kind::kModule, r.module(), "an unknown module", &d);
    if (!is_identifier(r.entry()))
      d.add(StatusCode::INVALID_ARGUMENT, "an entry that is no identifier");
    for (const v1::ArgSpec& a : r.args()) {
      if (a.kind() < v1::ARG_KIND_BUFFER || a.kind() > v1::ARG_KIND_LOCAL) {
        d.add(StatusCode::INVALID_ARGUMENT, "an argument of no kind kad.v1 has");
      } else if (a.kind() == v1::ARG_KIND_SCALAR && scalar_size(a.scalar()) == 0) {
        d.add(StatusCode::INVALID_ARGUMENT, "a scalar of no type kad.v1 has");
      } else if (a.kind() != v1::ARG_KIND_SCALAR && a.scalar() != 0) {
        d.add(StatusCode::INVALID_ARGUMENT, "a scalar type on an argument that is no scalar");
      }
    }
    if (r.has_static_ndrange()) ndrange_defects(r.static_ndrange(), "the static ndrange", &d);
    if (r.has_static_workgroup())
      workgroup_defects(r.static_workgroup(), "the static workgroup", &d);
    if (!k.options_allowed)
      d.add(StatusCode::INVALID_ARGUMENT, "a build option off the allow-list");
    if (k.entry && k.module.intact && !k.signature_matches &&
        compiled_.count({k.module.digest, r.entry(), r.build_options()}))
      d.add(StatusCode::INVALID_ARGUMENT,
            "a signature that does not match a kernel some session compiled");
  }
  const bool cancel = rng_.chance(0.05);
  v1::GetKernelResponse response;
  Clock::duration elapsed;
  const grpc::Status st = unary(&v1::Kad::Stub::GetKernel, t, r, &response, cancel, &elapsed);
  check(Call::kGetKernel, t.in(brief_text(r)), st.error_code(), st.error_message(), d, false,
        cancel, elapsed, module == s.modules.end() ? "" : "module:  " + k.module.what);
  if (!t.live()) return;
  if (cancel && !st.ok()) s.uncertain.insert(Kind::kKernel);
  if (st.ok() && module != s.modules.end()) s.kernels[response.kernel()] = k;
}

void Fuzzer::create_queue(const Target& t) {
  v1::CreateQueueRequest r;
  bool bogus_device;
  r.set_device_id(pick_device_id(&bogus_device));
  // Any deadline is valid (kad caps it at its own); none short enough to end
  // the model's kernels on a loaded machine.
  const uint64_t timeouts[] = {0, 45'000, uint64_t{1} << 40, ~uint64_t{0}};
  r.set_launch_timeout_ms(timeouts[rng_.below(4)]);
  Defects d = t.session_defects;
  if (t.live() && bogus_device) d.add(StatusCode::NOT_FOUND, "an unknown device");
  v1::CreateQueueResponse response;
  Clock::duration elapsed;
  const grpc::Status st = unary(&v1::Kad::Stub::CreateQueue, t, r, &response, false, &elapsed);
  check(Call::kCreateQueue, t.in(brief_text(r)), st.error_code(), st.error_message(), d, !t.live(),
        false, elapsed);
  if (st.ok() && t.live()) t.session->queues[response.queue()] = QueueModel();
}

// ---- liveness ----------------------------------------------------------------------

void Fuzzer::check_daemon_serves() {
  beat();
  std::string digest;
  const std::string error = check_fresh_session_runs_saxpy(daemon_.tcp_uri(), &digest);
  check_alive();
  if (stopped_) return;
  if (!error.empty()) {
    violation("a fresh session no longer runs saxpy correctly", Call::kSubmit, "  " + error, true);
    return;
  }
  compiled_.insert({digest, "saxpy", ""});
  journal_.add("#" + std::to_string(operation_) + " a fresh session ran saxpy correctly");
}

void Fuzzer::finish() {
  check_daemon_serves();
  while (!sessions_.empty()) close_session(sessions_.size() - 1);
  // kad reclaims closed sessions asynchronously; then it holds nothing of theirs.
  for (const auto give_up = Clock::now() + seconds(10); !stopped_;) {
    v1::GetStatusResponse status;
    Clock::duration elapsed;
    const grpc::Status st = unary(&v1::Kad::Stub::GetStatus, Target{nullptr, std::nullopt, {}, ""},
                                  v1::GetStatusRequest(), &status, false, &elapsed);
    check(Call::kGetStatus, "{} (every session closed)", st.error_code(), st.error_message(), {},
          false, false, elapsed);
    if (!st.ok()) return;
    if (status.sessions() == 0 && status.buffers() == 0 && status.modules() == 0 &&
        status.kernels() == 0 && status.queues() == 0)
      return;
    if (Clock::now() > give_up) {
      violation("objects left 10 s after every session closed", Call::kGetStatus,
                "  " + brief_text(status), false);
      return;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
}

}  // namespace kad::api_fuzz
