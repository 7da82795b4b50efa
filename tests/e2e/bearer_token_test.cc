// DESIGN §8, identity over TCP: a kad started with --tokens serves a TCP
// client only with one of its bearer tokens. Without one, or with a wrong
// one, every call — OpenSession, ListDevices, GetStatus, a session's calls —
// is UNAUTHENTICATED, naming why; the UNIX socket is not asked; SIGHUP reads
// the file again. Real kad, real gRPC (the client library and raw stubs).
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kad/client.h"
#include "kad/v1/kad.grpc.pb.h"
#include "tests/support/daemon.h"

namespace kad::testing {
namespace {

constexpr char kGood[] = "good-token-0123456789abcdef";
constexpr char kOther[] = "other-token-0123456789abcdef";

class BearerTokens : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/kad-tokens-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    write_tokens(absl::StrCat("# token tenant\n", kGood, " team-a\n\n"));
    auto d = Daemon::start({"--no-workers", "--tokens", tokens_file()});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
  }
  void TearDown() override {
    daemon_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string tokens_file() const { return dir_ + "/tokens"; }
  // Waits (up to 10 s) until the daemon's log holds `text`.
  bool logged(absl::string_view text) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!absl::StrContains(daemon_->log(), text)) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
  void write_tokens(const std::string& text) const { std::ofstream(tokens_file()) << text; }

  // A raw stub on the TCP address, and a call's metadata.
  std::unique_ptr<v1::Kad::Stub> stub() const {
    return v1::Kad::NewStub(
        grpc::CreateChannel(daemon_->tcp_uri().substr(6), grpc::InsecureChannelCredentials()));
  }
  static void authorize(grpc::ClientContext& context, const std::string& value) {
    if (!value.empty()) context.AddMetadata("authorization", value);
  }

  absl::StatusOr<std::unique_ptr<Client>> connect_tcp(const std::string& token) const {
    client::ConnectOptions options;
    options.token = token;
    return Client::connect(daemon_->tcp_uri(), "tokens", options);
  }

  std::string dir_;
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(BearerTokens, WithoutAValidTokenNothingIsReachableOverTcp) {
  auto kad = stub();
  for (const std::string& authorization :
       {std::string(), absl::StrCat("Bearer ", kOther), std::string("Basic dXNlcjpwYXNz"),
        absl::StrCat("Bearer ", std::string(kGood).substr(0, 10))}) {
    SCOPED_TRACE(authorization.empty() ? "no token" : authorization);
    grpc::ClientContext list_context;
    authorize(list_context, authorization);
    v1::ListDevicesResponse devices;
    grpc::Status listed = kad->ListDevices(&list_context, {}, &devices);
    EXPECT_EQ(listed.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(devices.devices_size(), 0);

    grpc::ClientContext status_context;
    authorize(status_context, authorization);
    v1::GetStatusResponse status;
    EXPECT_EQ(kad->GetStatus(&status_context, {}, &status).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);

    grpc::ClientContext session_context;
    authorize(session_context, authorization);
    v1::OpenSessionRequest open;
    auto stream = kad->OpenSession(&session_context, open);
    v1::SessionEvent event;
    EXPECT_FALSE(stream->Read(&event));
    grpc::Status opened = stream->Finish();
    EXPECT_EQ(opened.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    if (authorization.empty()) {
      EXPECT_TRUE(absl::StrContains(opened.error_message(), "requires a bearer token on TCP"))
          << opened.error_message();
    } else if (absl::StartsWith(authorization, "Basic")) {
      EXPECT_TRUE(absl::StrContains(opened.error_message(), "must be `Bearer TOKEN`"))
          << opened.error_message();
    } else {
      EXPECT_TRUE(absl::StrContains(opened.error_message(), "not one kad accepts"))
          << opened.error_message();
    }
  }
  // The client library says the same.
  auto refused = connect_tcp(kOther);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "not one kad accepts"))
      << refused.status();
}

TEST_F(BearerTokens, ASessionsCallsNeedTheTokenToo) {
  auto client = connect_tcp(kGood);
  ASSERT_TRUE(client.ok()) << client.status();
  // The session id alone, without the token, opens nothing.
  grpc::ClientContext context;
  context.AddMetadata("kad-session", (*client)->session_id());
  v1::AllocateBufferRequest request;
  request.set_size(64);
  v1::AllocateBufferResponse response;
  grpc::Status allocated = stub()->AllocateBuffer(&context, request, &response);
  EXPECT_EQ(allocated.error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(BearerTokens, AValidTokenServesTheWholeApiAndTheUnixSocketAsksForNone) {
  auto client = connect_tcp(kGood);
  ASSERT_TRUE(client.ok()) << client.status();
  auto devices = (*client)->devices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_FALSE(devices->empty());
  EXPECT_TRUE((*client)->status().ok());
  auto buffer = (*client)->allocate(1024);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  auto queue = (*client)->create_queue();
  ASSERT_TRUE(queue.ok()) << queue.status();
  std::vector<int32_t> data(256, 7), back(256, 0);
  ASSERT_TRUE((*queue)->write(*buffer, 0, std::as_bytes(std::span(data))).ok());
  ASSERT_TRUE((*queue)->read(*buffer, 0, std::as_writable_bytes(std::span(back))).ok());
  EXPECT_EQ(back, data);

  auto local = Client::connect(daemon_->unix_uri(), "local");
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_TRUE((*local)->devices().ok());
}

TEST_F(BearerTokens, TheTokenComesFromTheEnvironmentOrAFile) {
  setenv("KAD_TOKEN", kGood, 1);
  auto from_env = connect_tcp("");
  unsetenv("KAD_TOKEN");
  ASSERT_TRUE(from_env.ok()) << from_env.status();
  EXPECT_TRUE((*from_env)->devices().ok());

  const std::string file = dir_ + "/my-token";
  std::ofstream(file) << kGood << "\n";
  setenv("KAD_TOKEN_FILE", file.c_str(), 1);
  auto from_file = connect_tcp("");
  unsetenv("KAD_TOKEN_FILE");
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_TRUE((*from_file)->devices().ok());
}

TEST_F(BearerTokens, SighupReadsTheTokensAgain) {
  write_tokens(absl::StrCat(kOther, " team-b\n"));
  ASSERT_EQ(kill(daemon_->pid(), SIGHUP), 0);
  // The reload is logged once done.
  ASSERT_TRUE(logged("bearer tokens read again")) << daemon_->log();
  EXPECT_FALSE(connect_tcp(kGood).ok()) << "a token taken out of the file still serves";
  auto other = connect_tcp(kOther);
  ASSERT_TRUE(other.ok()) << other.status();

  // A file kad cannot use keeps the tokens in force, and says why.
  write_tokens("short team-c\n");
  ASSERT_EQ(kill(daemon_->pid(), SIGHUP), 0);
  ASSERT_TRUE(logged("too easy to guess")) << daemon_->log();
  EXPECT_TRUE(absl::StrContains(daemon_->log(), "the tokens in force stay")) << daemon_->log();
  EXPECT_TRUE(connect_tcp(kOther).ok());
}

TEST(BearerTokenFile, AMalformedFileStopsKadNamingTheLine) {
  char dir[] = "/tmp/kad-tokens-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/tokens";
  std::ofstream(file) << "# fine\nthree fields here-0123456789\n";
  auto d = Daemon::start({"--no-workers", "--tokens", file});
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(absl::StrContains(
      d.status().message(),
      absl::StrCat("--tokens ", file, ", line 2: expected `TOKEN TENANT`, found 3 fields")))
      << d.status();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kad::testing
