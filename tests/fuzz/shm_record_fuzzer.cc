// libFuzzer target: the shared-memory submission-record decoder of the
// daemon, fed arbitrary bytes as a record (DESIGN §8: wire decoders and the
// shared-memory ring are fuzzed). Whatever the bytes, decoding returns a
// status and anything it accepts is within kad's limits.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "server/shm_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kad::shm::v1::SubmitRecord record;
  std::memset(&record, 0, sizeof(record));
  std::memcpy(&record, data, size < sizeof(record) ? size : sizeof(record));
  static kad::server::DecodedLaunch decoded;
  if (kad::server::decode_launch(record, 1, &decoded).ok()) {
    const kad::server::LaunchByHandle& r = decoded.request;
    if (r.args.size() > kad::shm::v1::kMaxArgs) std::abort();
    if (r.ndrange && (r.ndrange->rank() > 8 || r.ndrange->offsets.rank != r.ndrange->rank()))
      std::abort();
    if (r.workgroup && r.workgroup->rank > 8) std::abort();
    for (const kad::KernelArg& a : r.args) {
      if (a.kind == kad::ArgKind::kScalar && a.scalar == kad::ScalarType::kNone) std::abort();
    }
  }
  (void)kad::server::check_arena_range(record, kad::shm::v1::kArenaBytes);
  return 0;
}
