// Zero-copy buffers (issue "Shared-memory transport"): on a host-visible
// device (PoCL), a local client's buffers are the device's memory, mapped
// into the client; ownership and lifetime rules hold; no other session can
// map them.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "gmock/gmock.h"
#include "kad/shm/v1/layout.h"
#include "tests/e2e/e2e.h"

namespace kad {
namespace {

using client::Arg;
using client::ArgSpec;
using ::testing::HasSubstr;

constexpr char kTwice[] = R"(
kernel void twice(KAD_CONTEXT, global int* x) {
  if (kad_active()) x[kad_global_linear()] *= 2;
})";

class ZeroCopy : public testing::DaemonSuite {
 protected:
  client::Kernel twice(Client& c) {
    auto m = c.load_module(kTwice);
    auto k = c.get_kernel(*m, {.entry = "twice", .args = {ArgSpec::buffer()}});
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? *k : client::Kernel{};
  }
};

TEST_F(ZeroCopy, ALocalClientsBufferIsTheDevicesMemory) {
  auto c = connect(daemon().unix_uri());
  auto queue = c->create_queue();
  auto buffer = c->allocate(256 * sizeof(int32_t));
  ASSERT_TRUE(queue.ok() && buffer.ok());
  ASSERT_TRUE(buffer->mapped);
  auto memory = c->map(*buffer);
  ASSERT_TRUE(memory.ok()) << memory.status();
  ASSERT_EQ(memory->size(), 256 * sizeof(int32_t));
  auto* x = reinterpret_cast<int32_t*>(memory->data());
  for (int i = 0; i < 256; ++i) x[i] = i;  // written in place: no copy to the daemon
  const client::Kernel k = twice(*c);
  const Arg args[] = {Arg::buffer(*buffer)};
  auto launched = (*queue)->launch(k, client::Dims{256}, nullptr, args);
  ASSERT_TRUE(launched.ok()) << launched.status();
  ASSERT_TRUE((*queue)->wait(launched->event).ok());
  for (int i = 0; i < 256; ++i) ASSERT_EQ(x[i], 2 * i) << "the device wrote this memory";
}

TEST_F(ZeroCopy, BuffersReachedOverGrpcAreCopiedNotMapped) {
  for (const std::string& uri : {daemon().tcp_uri(), daemon().unix_uri() + "?transport=grpc"}) {
    auto c = connect(uri);
    auto queue = c->create_queue();
    auto buffer = c->allocate(64 * sizeof(int32_t));
    ASSERT_TRUE(buffer.ok());
    EXPECT_FALSE(buffer->mapped) << uri;
    EXPECT_EQ(c->map(*buffer).status().code(), absl::StatusCode::kFailedPrecondition);
    std::vector<int32_t> x(64, 21);
    ASSERT_TRUE((*queue)->write(*buffer, 0, testing::bytes_of(x)).ok());
    const Arg args[] = {Arg::buffer(*buffer)};
    ASSERT_TRUE((*queue)->launch(twice(*c), client::Dims{64}, nullptr, args).ok());
    ASSERT_TRUE((*queue)->read(*buffer, 0, testing::bytes_of(x)).ok());
    EXPECT_EQ(x, std::vector<int32_t>(64, 42)) << uri;
  }
}

TEST_F(ZeroCopy, AMappedBufferCannotBeFreedWhileALaunchUsingItIsQueued) {
  auto c = connect(daemon().unix_uri());
  auto queue = c->create_queue();
  auto buffer = c->allocate(1 << 20);
  ASSERT_TRUE(buffer.ok() && buffer->mapped);
  const Arg args[] = {Arg::buffer(*buffer)};
  const client::Dims range{1 << 18};
  auto launched = (*queue)->launch(twice(*c), &range, nullptr, args);
  ASSERT_TRUE(launched.ok());
  absl::Status early = c->free(*buffer);
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition) << early;
  EXPECT_THAT(std::string(early.message()), HasSubstr("not yet waited for"));
  (*queue)->wait().IgnoreError();
  EXPECT_TRUE(c->free(*buffer).ok());
}

TEST_F(ZeroCopy, NoOtherSessionCanMapABuffer) {
  auto owner = connect(daemon().unix_uri(), "owner");
  auto buffer = owner->allocate(4096);
  ASSERT_TRUE(buffer.ok() && buffer->mapped);
  auto stranger = connect(daemon().unix_uri(), "stranger");
  auto ask = [&](const std::string& session, uint64_t handle) {
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = daemon().unix_uri().substr(5) + ".shm";
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    shm::v1::MapBuffer request{};
    request.request = static_cast<uint32_t>(shm::v1::Request::kMapBuffer);
    request.version = shm::v1::kVersion;
    std::memcpy(request.session_id, session.data(), std::min<size_t>(session.size(), 64));
    request.buffer = handle;
    send(fd, &request, sizeof(request), 0);
    shm::v1::Reply reply{};
    recv(fd, &reply, sizeof(reply), 0);
    close(fd);
    return reply;
  };
  shm::v1::Reply r = ask(stranger->session_id(), buffer->handle);
  EXPECT_EQ(r.code, static_cast<int>(absl::StatusCode::kNotFound));
  r = ask("00000000000000000000000000000000", buffer->handle);
  EXPECT_EQ(r.code, static_cast<int>(absl::StatusCode::kNotFound));
  r = ask(owner->session_id(), buffer->handle);
  EXPECT_EQ(r.code, 0);
}

}  // namespace
}  // namespace kad
