// The reply codes kad.proto documents for each kad.v1 call: the table the API
// fuzzer checks every reply against.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>
#include <string_view>

namespace kad::api_fuzz {

// Every call, and every kind of Submit command, whose replies carry a code.
enum class Call {
  kListDevices,
  kOpenSession,
  kGetStatus,
  kAllocateBuffer,
  kFreeBuffer,
  kWriteBuffer,
  kReadBuffer,
  kLoadModule,
  kGetKernel,
  kCreateQueue,
  kSubmit,  // the stream's own final status
  kLaunch,
  kWait,
  kCopyIn,
  kCopyOut,
  kPing,
  kEmptyCommand,  // a QueueCommand with no command set
};

std::string_view call_name(Call call);

// Whether kad.proto lists `code` for `call` (OK included). Calls that need a
// session may also return FAILED_PRECONDITION and NOT_FOUND; a wait also
// carries any launch code.
bool documented(Call call, grpc::StatusCode code);

// "INVALID_ARGUMENT", or the number for a code outside google.rpc.Code.
std::string code_name(int code);

}  // namespace kad::api_fuzz
