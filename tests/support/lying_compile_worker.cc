// A compile worker that lies (DESIGN §8): a compile worker runs a client's
// module through the driver's compiler, which that module may take over, so
// kad trusts nothing it answers. This one says hello as kad's workers do,
// then answers each compile (for its device or the wide one beside it)
// with a reply that claims success and carries a
// program binary, but reports limits no kernel has (a group of 0
// work-items). Started through a WorkerPool by
// tests/server/worker_lies_test.cc.
#include <unistd.h>

#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "kad/worker/v1/worker.pb.h"
#include "server/worker/worker_protocol.h"

int main(int argc, char** argv) {
  namespace worker = kad::server::worker;
  bool has_fd = false;
  for (int i = 1; i < argc; ++i) has_fd |= absl::StartsWith(argv[i], "--worker-fd=3");
  if (!has_fd) return 2;
  worker::Connection connection(3);
  const worker::HelloRecord hello{static_cast<int32_t>(getpid()), 0, 0, 0};
  if (!connection.send(worker::Op::kHello, worker::bytes_of(hello)).ok()) return 1;
  worker::MessageReader reader(connection);
  for (;;) {
    worker::Header header;
    std::span<const std::byte> payload;
    if (!reader.next(&header, &payload, nullptr, absl::InfiniteFuture(), 64 << 20).ok())
      return 0;  // kad hung up
    if (header.op != static_cast<uint32_t>(worker::Op::kCompile) &&
        header.op != static_cast<uint32_t>(worker::Op::kCompileWide))
      return 3;
    kad::worker::v1::CompileReply lie;
    lie.set_code(0);
    lie.set_max_workgroup_size(0);
    lie.set_preferred_multiple(1);
    lie.set_program_binary("not a program binary");
    const std::string out = lie.SerializeAsString();
    if (!connection
             .send(worker::Op::kCompileReply,
                   std::as_bytes(std::span<const char>(out.data(), out.size())))
             .ok())
      return 1;
  }
}
