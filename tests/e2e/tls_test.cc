// DESIGN §8, identity over TCP: the client library speaks TLS (tls://) to a
// kad started with --tls-cert, checks kad's certificate against a CA, and
// presents its own where kad asks for one (--tls-client-ca). A CA generated
// here by the openssl tool; a real kad; every failure is UNAUTHENTICATED and
// says why.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kad/client.h"
#include "tests/support/daemon.h"

namespace kad::testing {
namespace {

namespace fs = std::filesystem;

// A CA, a server certificate for 127.0.0.1 and a client certificate it
// signed, and a second CA that signed nothing kad knows.
class TestPki {
 public:
  static std::unique_ptr<TestPki> create() {
    auto pki = std::unique_ptr<TestPki>(new TestPki());
    char dir[] = "/tmp/kad-pki-XXXXXX";
    if (mkdtemp(dir) == nullptr) return nullptr;
    pki->dir_ = dir;
    const std::string d = pki->dir_;
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::vector<std::string> steps = {
        absl::StrCat("openssl req -x509 ", key, " -keyout ", d, "/ca.key -out ", d,
                     "/ca.pem -days 2 -subj '/CN=kad test CA'"),
        absl::StrCat("openssl req -x509 ", key, " -keyout ", d, "/other-ca.key -out ", d,
                     "/other-ca.pem -days 2 -subj '/CN=another CA'"),
        absl::StrCat("openssl req ", key, " -keyout ", d, "/server.key -out ", d,
                     "/server.csr -subj '/CN=kad'"),
        absl::StrCat("openssl x509 -req -in ", d, "/server.csr -CA ", d, "/ca.pem -CAkey ", d,
                     "/ca.key -CAcreateserial -days 2 -extfile ", d, "/server.ext -out ", d,
                     "/server.pem"),
        absl::StrCat("openssl req ", key, " -keyout ", d, "/client.key -out ", d,
                     "/client.csr -subj '/CN=workstation-1'"),
        absl::StrCat("openssl x509 -req -in ", d, "/client.csr -CA ", d, "/ca.pem -CAkey ", d,
                     "/ca.key -CAcreateserial -days 2 -out ", d, "/client.pem"),
        absl::StrCat("openssl req ", key, " -keyout ", d, "/stranger.key -out ", d,
                     "/stranger.csr -subj '/CN=stranger'"),
        absl::StrCat("openssl x509 -req -in ", d, "/stranger.csr -CA ", d, "/other-ca.pem -CAkey ",
                     d, "/other-ca.key -CAcreateserial -days 2 -out ", d, "/stranger.pem"),
    };
    std::ofstream(d + "/server.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
    for (const std::string& step : steps) {
      if (std::system((step + " > /dev/null 2>&1").c_str()) != 0) return nullptr;
    }
    return pki;
  }
  ~TestPki() { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }

 private:
  TestPki() = default;
  std::string dir_;
};

class Tls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = TestPki::create().release();
    ASSERT_NE(pki_, nullptr) << "the openssl tool could not make a test CA";
  }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }

  static std::unique_ptr<Daemon> start(std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"--no-workers", "--tls-cert", pki_->file("server.pem"),
                                     "--tls-key", pki_->file("server.key")};
    args.insert(args.end(), more.begin(), more.end());
    auto d = Daemon::start(args);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : nullptr;
  }
  static std::string tls_uri(const Daemon& d) { return "tls://" + d.tcp_uri().substr(6); }
  static client::ConnectOptions trusting(const std::string& ca, const std::string& me = "") {
    client::ConnectOptions o;
    o.tls_ca_file = pki_->file(ca);
    if (!me.empty()) {
      o.tls_cert_file = pki_->file(me + ".pem");
      o.tls_key_file = pki_->file(me + ".key");
    }
    return o;
  }
  // A copy through kad and back, to show the whole API is served.
  static void round_trip(Client& client) {
    auto buffer = client.allocate(256 * sizeof(int32_t));
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    auto queue = client.create_queue();
    ASSERT_TRUE(queue.ok()) << queue.status();
    std::vector<int32_t> data(256, 11), back(256, 0);
    ASSERT_TRUE((*queue)->write(*buffer, 0, std::as_bytes(std::span(data))).ok());
    ASSERT_TRUE((*queue)->read(*buffer, 0, std::as_writable_bytes(std::span(back))).ok());
    EXPECT_EQ(back, data);
  }

  static inline TestPki* pki_ = nullptr;
};

TEST_F(Tls, TheClientLibrarySpeaksTlsAndChecksKadsCertificate) {
  auto kad = start();
  ASSERT_NE(kad, nullptr);
  auto client = Client::connect(tls_uri(*kad), "tls", trusting("ca.pem"));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->devices().ok());
  round_trip(**client);

  // Plaintext to the TLS port is no session.
  EXPECT_FALSE(Client::connect(kad->tcp_uri(), "plain").ok());
  // A CA that did not sign kad's certificate: UNAUTHENTICATED, saying so.
  auto wrong = Client::connect(tls_uri(*kad), "wrong-ca", trusting("other-ca.pem"));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated) << wrong.status();
  EXPECT_TRUE(absl::StrContains(wrong.status().message(),
                                "kad's certificate is not one the CA given signed"))
      << wrong.status();
  // A CA file that is not there.
  client::ConnectOptions missing;
  missing.tls_ca_file = "/nonexistent/ca.pem";
  auto no_ca = Client::connect(tls_uri(*kad), "no-ca", missing);
  ASSERT_FALSE(no_ca.ok());
  EXPECT_TRUE(absl::StrContains(no_ca.status().message(),
                                "cannot read the TLS CA file /nonexistent/ca.pem"))
      << no_ca.status();
}

TEST_F(Tls, MutualTlsServesOnlyClientsWithACertificateItsCaSigned) {
  auto kad = start({"--tls-client-ca", pki_->file("ca.pem")});
  ASSERT_NE(kad, nullptr);
  auto known = Client::connect(tls_uri(*kad), "known", trusting("ca.pem", "client"));
  ASSERT_TRUE(known.ok()) << known.status();
  round_trip(**known);

  auto anonymous = Client::connect(tls_uri(*kad), "anonymous", trusting("ca.pem"));
  ASSERT_FALSE(anonymous.ok());
  EXPECT_EQ(anonymous.status().code(), absl::StatusCode::kUnauthenticated) << anonymous.status();
  EXPECT_TRUE(absl::StrContains(anonymous.status().message(), "this client gave none"))
      << anonymous.status();

  auto stranger = Client::connect(tls_uri(*kad), "stranger", trusting("ca.pem", "stranger"));
  ASSERT_FALSE(stranger.ok());
  EXPECT_EQ(stranger.status().code(), absl::StatusCode::kUnauthenticated) << stranger.status();
  EXPECT_TRUE(absl::StrContains(stranger.status().message(), "this client gave one"))
      << stranger.status();

  // A certificate without its key is refused before any connection.
  client::ConnectOptions half = trusting("ca.pem");
  half.tls_cert_file = pki_->file("client.pem");
  auto refused = Client::connect(tls_uri(*kad), "half", half);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "needs its key")) << refused.status();
}

// The subject of a client certificate mutual TLS verified names its tenant
// (DESIGN §8); a certificate no tenant names is the default tenant.
TEST_F(Tls, AClientCertificatesSubjectNamesItsTenant) {
  const std::string config = pki_->file("tenants.toml");
  std::ofstream(config) << "[tenants.workstations]\nsubjects = [\"CN=workstation-1\"]\n"
                        << "queues = 3\n";
  auto kad = start({"--tls-client-ca", pki_->file("ca.pem"), "--config", config});
  ASSERT_NE(kad, nullptr);
  auto known = Client::connect(tls_uri(*kad), "known", trusting("ca.pem", "client"));
  ASSERT_TRUE(known.ok()) << known.status();
  auto status = (*known)->status();
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->tenants.size(), 1u);
  EXPECT_EQ(status->tenants[0].name, "workstations");
  // Its quotas are the tenant's.
  std::vector<std::unique_ptr<client::Queue>> queues;
  for (int i = 0; i < 3; ++i) {
    auto q = (*known)->create_queue();
    ASSERT_TRUE(q.ok()) << q.status();
    queues.push_back(*std::move(q));
  }
  auto fourth = (*known)->create_queue();
  EXPECT_EQ(fourth.status().code(), absl::StatusCode::kResourceExhausted) << fourth.status();
  EXPECT_TRUE(absl::StrContains(fourth.status().message(),
                                "tenant `workstations` is at its quota of queues: 3 in use, 1 "
                                "more asked, limit 3 (tenants.workstations.queues)"))
      << fourth.status();
}

TEST_F(Tls, ATokenOverTlsIsCheckedToo) {
  const std::string tokens = pki_->file("tokens");
  std::system(("echo 'tls-token-0123456789abcdef team-tls' > " + tokens).c_str());
  auto kad = start({"--tokens", tokens});
  ASSERT_NE(kad, nullptr);
  client::ConnectOptions with_token = trusting("ca.pem");
  with_token.token = "tls-token-0123456789abcdef";
  auto client = Client::connect(tls_uri(*kad), "token", with_token);
  ASSERT_TRUE(client.ok()) << client.status();
  round_trip(**client);
  // The token names the caller's tenant.
  auto status = (*client)->status();
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->tenants.size(), 1u);
  EXPECT_EQ(status->tenants[0].name, "team-tls");

  auto without = Client::connect(tls_uri(*kad), "no-token", trusting("ca.pem"));
  ASSERT_FALSE(without.ok());
  EXPECT_TRUE(absl::StrContains(without.status().message(), "requires a bearer token"))
      << without.status();
}

TEST(TlsFlags, AClientCaWithoutAServerCertificateIsRefused) {
  auto d = Daemon::start({"--no-workers", "--tls-client-ca", "/etc/hostname"});
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(absl::StrContains(d.status().message(), "--tls-client-ca needs --tls-cert"))
      << d.status();
}

}  // namespace
}  // namespace kad::testing
