// kad: the device launch service daemon. Owns the machine's devices and the
// compiled-kernel cache, and serves kad.v1 over gRPC on UNIX sockets and TCP.
// SIGTERM (or SIGINT) drains: in-flight launches finish, new ones are
// refused, then it exits 0.
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/registry.h"
#include "core/kernel_lowering.h"
#include "server/config.h"
#include "server/engine.h"
#include "server/kad_service.h"
#include "server/shm_listener.h"
#include "spdlog/spdlog.h"

namespace {

using kad::server::Config;

// Removes a stale socket file and creates the socket's folder.
bool prepare_unix_socket(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      spdlog::error("{} exists and is not a socket; not touching it", path);
      return false;
    }
    unlink(path.c_str());
  }
  return true;
}

void write_ready_file(const std::string& path, const std::vector<std::string>& uris) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    for (const auto& u : uris) out << u << "\n";
  }
  std::filesystem::rename(tmp, path);
}

int serve(const Config& config) {
  // Block the stop signals in every thread; main waits for them with sigwait.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  if (config.cache_dir) {
    kad::KernelLowering::configure_shared_cache(*config.cache_dir, config.cache_max_bytes);
  }
  kad::DeviceRegistry registry =
      kad::discover_devices({.cuda_prefer_blocks = config.cuda_prefer_blocks});
  {
    kad::KernelLowering& lowering = kad::KernelLowering::shared();
    lowering.set_limits({.seconds = config.compile_timeout_s,
                         .memory_bytes = config.compile_memory_mib << 20,
                         .output_bytes = kad::ToolchainLimits{}.output_bytes});
    const kad::CodeCache& cache = lowering.cache();
    absl::Status toolchain = lowering.toolchain_status();
    spdlog::info("kernel toolchain: {}; code cache: {}",
                 toolchain.ok() ? lowering.version() : std::string(toolchain.message()),
                 cache.enabled() ? cache.folder() : std::string("off (memory only)"));
    if (absl::Status sandbox = kad::tool_sandbox_support(); !sandbox.ok())
      spdlog::warn("{}: compilers run unconfined, behind the source checks alone",
                   std::string(sandbox.message()));
  }
  for (const std::string& line : registry.log) spdlog::info("{}", line);
  if (registry.devices.empty()) spdlog::warn("no device found: kad serves, but cannot launch");
  for (const auto& d : registry.devices) {
    const kad::DeviceInfo& i = d->info();
    spdlog::info("device {}: {} ({}), max workgroup {}, {} compute units, {} MiB{}", i.id, i.name,
                 i.platform, i.limits.max_workgroup_size, i.limits.compute_units,
                 i.limits.global_memory_bytes >> 20,
                 d.get() == registry.default_device() ? " [default]" : "");
  }

  kad::server::Engine engine(std::move(registry), config.limits);
  kad::server::KadService service(engine);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(config.max_message_bytes));
  std::vector<std::unique_ptr<int>> ports;
  std::vector<kad::server::ListenAddress> addresses;
  for (const std::string& uri : config.listen) {
    absl::StatusOr<kad::server::ListenAddress> a = kad::server::parse_listen_uri(uri);
    if (!a.ok()) {
      spdlog::error("{}", std::string(a.status().message()));
      return 2;
    }
    std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
    if (a->tcp && !config.tls_cert.empty()) {
      grpc::SslServerCredentialsOptions tls;
      std::ifstream cert(config.tls_cert), key(config.tls_key);
      tls.pem_key_cert_pairs.push_back({std::string(std::istreambuf_iterator<char>(key), {}),
                                        std::string(std::istreambuf_iterator<char>(cert), {})});
      creds = grpc::SslServerCredentials(tls);
    } else if (a->tcp && !a->loopback && !config.allow_insecure_tcp) {
      spdlog::error(
          "refusing plaintext TCP on {}: give --tls-cert/--tls-key, listen on loopback, "
          "or pass --allow-insecure-tcp",
          uri);
      return 2;
    }
    if (!a->tcp && !prepare_unix_socket(uri.substr(5))) return 1;
    ports.push_back(std::make_unique<int>(0));
    builder.AddListeningPort(a->address, creds, ports.back().get());
    addresses.push_back(*a);
  }
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    spdlog::error("cannot listen on {}", absl::StrJoin(config.listen, ", "));
    return 1;
  }
  std::vector<std::string> bound;
  for (size_t i = 0; i < addresses.size(); ++i) {
    const auto& a = addresses[i];
    if (a.tcp && *ports[i] == 0) {
      spdlog::error("cannot listen on {}", a.uri);
      return 1;
    }
    std::string uri = a.uri;
    if (a.tcp)
      uri = absl::StrCat("tcp://", a.address.substr(0, a.address.rfind(':')), ":", *ports[i]);
    bound.push_back(uri);
    spdlog::info("listening on {}", uri);
  }
  // Local clients get shared-memory channels on `<socket>.shm`.
  std::vector<std::unique_ptr<kad::server::ShmListener>> shm;
  for (const auto& a : addresses) {
    if (a.tcp || !config.shared_memory) continue;
    auto l = kad::server::ShmListener::start(engine, a.uri.substr(5) + ".shm",
                                             {config.shm_stall_timeout_ms});
    if (!l.ok()) {
      spdlog::warn("no shared memory for {}: {}", a.uri, std::string(l.status().message()));
      continue;
    }
    spdlog::info("shared memory for {} on {}", a.uri, (*l)->path());
    shm.push_back(*std::move(l));
  }
  if (!config.ready_file.empty()) write_ready_file(config.ready_file, bound);

  int signal = 0;
  sigwait(&stop, &signal);
  spdlog::info("{}: draining (in-flight launches finish, new ones are refused)",
               signal == SIGTERM ? "SIGTERM" : "SIGINT");
  server->GetHealthCheckService()->SetServingStatus(false);
  if (!engine.drain(config.limits.finish_timeout)) {
    // A kernel that never ends holds a driver thread no call can interrupt:
    // the process ends without it, within the drain timeout.
    spdlog::warn("launches still run after the drain timeout ({} s): exiting without them",
                 absl::ToInt64Seconds(config.limits.finish_timeout));
    for (const auto& a : addresses)
      if (!a.tcp) {
        unlink(a.uri.substr(5).c_str());
        unlink((a.uri.substr(5) + ".shm").c_str());
      }
    spdlog::shutdown();
    _exit(0);
  }
  // Queues are finished: give replies in flight a moment, then cancel the
  // streams clients keep open.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  shm.clear();
  for (const auto& a : addresses)
    if (!a.tcp) unlink(a.uri.substr(5).c_str());
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  kad::server::ParseOutcome parsed = kad::server::parse_config(argc, argv);
  if (parsed.exit) {
    std::fprintf(parsed.exit_code == 0 ? stdout : stderr, "%s\n", parsed.message.c_str());
    return parsed.exit_code;
  }
  spdlog::set_level(spdlog::level::from_str(parsed.config.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e kad %l: %v");
  return serve(parsed.config);
}
