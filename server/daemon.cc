#include "server/daemon.h"

#include <grpcpp/health_check_service_interface.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"

namespace kad::server {
namespace {

// Creates the socket's folder and removes a stale socket file; refuses a
// path that is something else.
absl::Status prepare_unix_socket(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " exists and is not a socket; not touching it"));
    }
    unlink(path.c_str());
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
  std::unique_ptr<Daemon> d(new Daemon(std::move(registry), options));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  std::vector<std::unique_ptr<int>> ports;
  std::vector<ListenAddress> addresses;
  for (const std::string& uri : options.listen) {
    absl::StatusOr<ListenAddress> a = parse_listen_uri(uri);
    if (!a.ok()) return a.status();
    std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
    if (a->tcp && !options.tls_cert.empty()) {
      grpc::SslServerCredentialsOptions tls;
      tls.pem_key_cert_pairs.push_back({read_file(options.tls_key), read_file(options.tls_cert)});
      creds = grpc::SslServerCredentials(tls);
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
    builder.AddListeningPort(a->address, creds, ports.back().get());
    addresses.push_back(*a);
  }
  builder.RegisterService(&d->service_);
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
  if (options.shared_memory) {
    for (const std::string& path : d->socket_files_) {
      absl::StatusOr<std::unique_ptr<ShmListener>> l =
          ShmListener::start(d->engine_, path + ".shm", options.shm);
      if (!l.ok()) {  // gRPC still serves that socket
        spdlog::warn("no shared memory for unix:{}: {}", path, std::string(l.status().message()));
        continue;
      }
      d->shm_.push_back(*std::move(l));
    }
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
  if (server_) {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    server_->Wait();
  }
  shm_.clear();
  remove_socket_files();
}

void Daemon::remove_socket_files() {
  for (const std::string& path : socket_files_) {
    unlink(path.c_str());
    unlink((path + ".shm").c_str());
  }
}

}  // namespace kad::server
