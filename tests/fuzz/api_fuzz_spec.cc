#include "tests/fuzz/api_fuzz_spec.h"

#include <initializer_list>

namespace kad::api_fuzz {
namespace {

using Code = grpc::StatusCode;

bool listed(Code code, std::initializer_list<Code> codes) {
  if (code == Code::OK) return true;
  for (Code c : codes)
    if (c == code) return true;
  return false;
}

// Launch reply codes, which a wait may carry too.
bool launch_code(Code code) {
  return listed(code, {Code::INVALID_ARGUMENT, Code::NOT_FOUND, Code::UNIMPLEMENTED,
                       Code::FAILED_PRECONDITION, Code::DEADLINE_EXCEEDED, Code::RESOURCE_EXHAUSTED,
                       Code::UNAVAILABLE, Code::ABORTED, Code::INTERNAL});
}

// A copy waits for its queue's launches: it reports their loss as a wait does.
bool write_code(Code code) {
  return listed(code, {Code::INVALID_ARGUMENT, Code::NOT_FOUND, Code::OUT_OF_RANGE, Code::INTERNAL,
                       Code::ABORTED, Code::DEADLINE_EXCEEDED, Code::UNAVAILABLE});
}

bool read_code(Code code) {
  return listed(code, {Code::INVALID_ARGUMENT, Code::NOT_FOUND, Code::OUT_OF_RANGE, Code::INTERNAL,
                       Code::ABORTED, Code::DEADLINE_EXCEEDED, Code::UNAVAILABLE});
}

bool needs_session(Call call) {
  return call != Call::kListDevices && call != Call::kOpenSession && call != Call::kGetStatus;
}

}  // namespace

std::string_view call_name(Call call) {
  switch (call) {
    case Call::kListDevices:
      return "ListDevices";
    case Call::kOpenSession:
      return "OpenSession";
    case Call::kGetStatus:
      return "GetStatus";
    case Call::kAllocateBuffer:
      return "AllocateBuffer";
    case Call::kFreeBuffer:
      return "FreeBuffer";
    case Call::kWriteBuffer:
      return "WriteBuffer";
    case Call::kReadBuffer:
      return "ReadBuffer";
    case Call::kLoadModule:
      return "LoadModule";
    case Call::kGetKernel:
      return "GetKernel";
    case Call::kCreateQueue:
      return "CreateQueue";
    case Call::kSubmit:
      return "Submit";
    case Call::kLaunch:
      return "Submit launch";
    case Call::kWait:
      return "Submit wait";
    case Call::kCopyIn:
      return "Submit copy_in";
    case Call::kCopyOut:
      return "Submit copy_out";
    case Call::kPing:
      return "Submit ping";
    case Call::kEmptyCommand:
      return "Submit empty command";
  }
  return "?";
}

bool documented(Call call, Code code) {
  if (needs_session(call) && (code == Code::FAILED_PRECONDITION || code == Code::NOT_FOUND))
    return true;
  switch (call) {
    case Call::kListDevices:
    case Call::kGetStatus:
      return code == Code::OK;
    case Call::kPing:  // INVALID_ARGUMENT: a ping naming another queue than its stream's
      return listed(code, {Code::INVALID_ARGUMENT});
    case Call::kOpenSession:
      return listed(code, {Code::UNAVAILABLE, Code::RESOURCE_EXHAUSTED});
    case Call::kAllocateBuffer:
      return listed(code, {Code::INVALID_ARGUMENT, Code::RESOURCE_EXHAUSTED, Code::UNAVAILABLE});
    case Call::kFreeBuffer:
      return listed(code, {Code::DEADLINE_EXCEEDED, Code::INTERNAL});
    // A transfer call also: RESOURCE_EXHAUSTED (more than the session may
    // hold open), CANCELLED (its session closed under it).
    case Call::kWriteBuffer:
      return write_code(code) || listed(code, {Code::RESOURCE_EXHAUSTED, Code::CANCELLED});
    case Call::kCopyIn:
      return write_code(code);
    case Call::kReadBuffer:
      return read_code(code) || listed(code, {Code::RESOURCE_EXHAUSTED, Code::CANCELLED});
    case Call::kCopyOut:
      return read_code(code);
    case Call::kLoadModule:
      return listed(code, {Code::INVALID_ARGUMENT, Code::RESOURCE_EXHAUSTED});
    case Call::kGetKernel:
      return listed(code, {Code::INVALID_ARGUMENT, Code::RESOURCE_EXHAUSTED});
    case Call::kCreateQueue:
      return listed(code, {Code::RESOURCE_EXHAUSTED, Code::UNAVAILABLE, Code::INTERNAL});
    case Call::kSubmit:
      // ABORTED: the last reply once its session closed (and a reactor
      // stream's status then); CANCELLED: how a stream on a thread then ends
      // (gRPC sends no status of a stream the server cancels);
      // RESOURCE_EXHAUSTED: more streams than a session may hold open.
      return listed(code, {Code::ABORTED, Code::CANCELLED, Code::RESOURCE_EXHAUSTED});
    case Call::kLaunch:
    case Call::kWait:
      return launch_code(code);
    case Call::kEmptyCommand:
      // kad.proto names no code for it; a malformed request is INVALID_ARGUMENT.
      return listed(code, {Code::INVALID_ARGUMENT});
  }
  return false;
}

std::string code_name(int code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  if (code >= 0 && code < static_cast<int>(std::size(kNames))) return kNames[code];
  return "code " + std::to_string(code);
}

}  // namespace kad::api_fuzz
