#include "server/daemon.h"

#include <grp.h>
#include <grpcpp/health_check_service_interface.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/metrics_exposition.h"
#include "spdlog/spdlog.h"

namespace kad::server {
namespace {

// Whether something accepts connections on the UNIX socket at `path`.
bool someone_listens(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  const bool connected =
      connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return connected;
}

// Creates the socket's folder and removes a stale socket file (one nobody
// answers on); refuses a path that is something else, or a socket that a
// daemon still serves.
absl::Status prepare_unix_socket(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  for (const std::string& file : {path, path + ".shm"}) {
    struct stat st;
    if (lstat(file.c_str(), &st) != 0) continue;
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(file, " exists and is not a socket; not touching it"));
    }
    if (someone_listens(file)) {
      return absl::FailedPreconditionError(
          absl::StrCat("another daemon serves on ", file, ": stop it, or listen on another path"));
    }
    unlink(file.c_str());
  }
  return absl::OkStatus();
}

// The group the sockets get: `name`, or `kad` if that group exists when
// none is named. -1: leave the daemon's own.
absl::StatusOr<gid_t> socket_group(const std::string& name) {
  const std::string wanted = name.empty() ? "kad" : name;
  std::vector<char> buffer(16384);
  group entry;
  group* found = nullptr;
  getgrnam_r(wanted.c_str(), &entry, buffer.data(), buffer.size(), &found);
  if (found != nullptr) return found->gr_gid;
  if (name.empty()) return static_cast<gid_t>(-1);
  return absl::InvalidArgumentError(
      absl::StrCat("--socket-group: no group is named `", name, "` on this machine"));
}

// Gives a socket file its mode and group. The default group (`kad`, not
// named by --socket-group) is given where kad may: a user's own kad on a
// machine that has the group keeps the user's, with a warning.
absl::Status restrict_socket(const std::string& path, uint32_t mode, gid_t gid, bool group_named) {
  if (chmod(path.c_str(), mode) != 0) {
    return absl::PermissionDeniedError(
        absl::StrFormat("cannot set mode %04o on %s: %s", mode, path, std::strerror(errno)));
  }
  if (gid != static_cast<gid_t>(-1) && chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
    const std::string why =
        absl::StrFormat("cannot give %s to group %d: %s", path, gid, std::strerror(errno));
    if (group_named) return absl::PermissionDeniedError(why);
    spdlog::warn("{}; it keeps kad's own group", why);
  }
  return absl::OkStatus();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::start(DeviceRegistry registry,
                                                      DaemonOptions options) {
  if (options.socket_mode > 0777) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--socket-mode %o is not a file mode (0 to 0777)", options.socket_mode));
  }
  absl::StatusOr<gid_t> gid = socket_group(options.socket_group);
  if (!gid.ok()) return gid.status();
  absl::StatusOr<std::unique_ptr<Authenticator>> authenticator =
      Authenticator::create(options.tokens_file);
  if (!authenticator.ok()) return authenticator.status();
  std::unique_ptr<Daemon> d(new Daemon(std::move(registry), options, *std::move(authenticator)));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  // Keepalive (DaemonOptions): kad pings idle connections, calls or not, and
  // lets clients ping it as often as every second without counting strikes
  // (kad's client pings every 30 s by default).
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_time)));
  builder.AddChannelArgument(
      GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_timeout)));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  std::vector<std::unique_ptr<int>> ports;
  std::vector<ListenAddress> addresses;
  for (const std::string& uri : options.listen) {
    absl::StatusOr<ListenAddress> a = parse_listen_uri(uri);
    if (!a.ok()) return a.status();
    std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
    if (a->tcp && !options.tls_cert.empty()) {
      grpc::SslServerCredentialsOptions tls;
      for (const std::string* file :
           {&options.tls_key, &options.tls_cert, &options.tls_client_ca}) {
        if (!file->empty() && read_file(*file).empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("cannot read ", *file, " (--tls-cert, --tls-key or --tls-client-ca)"));
        }
      }
      tls.pem_key_cert_pairs.push_back({read_file(options.tls_key), read_file(options.tls_cert)});
      if (!options.tls_client_ca.empty()) {
        // Mutual TLS: no certificate the CA did not sign gets past the handshake.
        tls.pem_root_certs = read_file(options.tls_client_ca);
        tls.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
      }
      creds = grpc::SslServerCredentials(tls);
    } else if (a->tcp && !options.tls_client_ca.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls-client-ca needs --tls-cert and --tls-key: ", uri, " would be plaintext"));
    } else if (a->tcp && !a->loopback && !options.allow_insecure_tcp) {
      return absl::InvalidArgumentError(absl::StrCat(
          "refusing plaintext TCP on ", uri,
          ": give --tls-cert/--tls-key, listen on loopback, or pass --allow-insecure-tcp"));
    }
    if (!a->tcp) {
      const std::string path = uri.substr(5);
      if (absl::Status s = prepare_unix_socket(path); !s.ok()) return s;
      d->socket_files_.push_back(path);
    }
    ports.push_back(std::make_unique<int>(0));
    // UNIX sockets: kad accepts (unix_acceptor.h), to know each peer's uid.
    if (a->tcp) builder.AddListeningPort(a->address, creds, ports.back().get());
    addresses.push_back(*a);
  }
  d->service_.set_peer_uid(
      [peers = &d->peers_](const std::string& peer) { return peers->uid_of(peer); });
  builder.RegisterService(&d->service_);
  if (!options.metrics.empty()) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> counting;
    counting.push_back(d->engine_.requests().interceptor_factory());
    builder.experimental().SetInterceptorCreators(std::move(counting));
  }
  // The sockets come with the umask's mode (kad's main sets 077, so only
  // the owner can connect until restrict_socket gives them theirs). The
  // umask is not changed here: it is the whole process's, and threads that
  // start processes run already.
  d->server_ = builder.BuildAndStart();
  if (!d->server_) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", absl::StrJoin(options.listen, ", ")));
  }
  for (size_t i = 0; i < addresses.size(); ++i) {
    const ListenAddress& a = addresses[i];
    if (a.tcp && *ports[i] == 0)
      return absl::UnavailableError(absl::StrCat("cannot listen on ", a.uri));
    d->uris_.push_back(
        a.tcp ? absl::StrCat("tcp://", a.address.substr(0, a.address.rfind(':')), ":", *ports[i])
              : a.uri);
  }
  for (const std::string& path : d->socket_files_) {
    absl::StatusOr<std::unique_ptr<UnixAcceptor>> acceptor =
        UnixAcceptor::start(*d->server_, path, d->peers_);
    if (!acceptor.ok()) return acceptor.status();
    d->acceptors_.push_back(*std::move(acceptor));
  }
  for (const std::string& path : d->socket_files_) {
    if (absl::Status s =
            restrict_socket(path, options.socket_mode, *gid, !options.socket_group.empty());
        !s.ok())
      return s;
  }
  if (options.shared_memory) {
    for (const std::string& path : d->socket_files_) {
      absl::StatusOr<std::unique_ptr<ShmListener>> l =
          ShmListener::start(d->engine_, path + ".shm", options.shm);
      if (l.ok()) {
        if (absl::Status s = restrict_socket(path + ".shm", options.socket_mode, *gid,
                                             !options.socket_group.empty());
            !s.ok())
          return s;
      }
      if (!l.ok()) {  // gRPC still serves that socket
        spdlog::warn("no shared memory for unix:{}: {}", path, std::string(l.status().message()));
        continue;
      }
      d->shm_.push_back(*std::move(l));
    }
  }
  if (!options.metrics.empty()) {
    Engine* engine = &d->engine_;
    absl::StatusOr<std::unique_ptr<MetricsServer>> metrics = MetricsServer::start(
        options.metrics,
        [engine] { return prometheus_text(engine->counters(), engine->requests()); });
    if (!metrics.ok()) return metrics.status();
    d->metrics_ = *std::move(metrics);
  }
  return d;
}

Daemon::~Daemon() { shutdown(absl::ZeroDuration()); }

std::shared_ptr<grpc::Channel> Daemon::in_process_channel() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize((4 << 20) + (64 << 10));
  return server_->InProcessChannel(args);
}

bool Daemon::drain(absl::Duration timeout) {
  server_->GetHealthCheckService()->SetServingStatus(false);
  return engine_.drain(timeout);
}

void Daemon::shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  metrics_.reset();
  acceptors_.clear();  // no new connections while the server stops
  if (server_) {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    server_->Wait();
  }
  shm_.clear();
  remove_socket_files();
}

absl::Status Daemon::reload_tokens() {
  if (!authenticator_->enabled()) return absl::OkStatus();
  return authenticator_->reload();
}

void Daemon::remove_socket_files() {
  for (const std::string& path : socket_files_) {
    unlink(path.c_str());
    unlink((path + ".shm").c_str());
  }
}

}  // namespace kad::server
