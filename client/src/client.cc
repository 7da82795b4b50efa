#include "kad/client.h"

#include <grpcpp/grpcpp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "client/src/connection.h"
#include "kad/inproc.h"
#include "kad/v1/kad.grpc.pb.h"

namespace kad {
namespace client {
namespace {

constexpr int kMaxMessage = (4 << 20) + (64 << 10);

}  // namespace

absl::Status from_grpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

absl::Status Connection::status_of(const grpc::Status& s) const {
  if (s.ok()) return absl::OkStatus();
  // A broken connection fails the call and the session's stream together:
  // the stream's news may come a moment after the call's.
  const bool gone =
      (s.error_code() == grpc::StatusCode::UNAVAILABLE && session_lost(absl::Milliseconds(100))) ||
      (s.error_code() == grpc::StatusCode::NOT_FOUND &&
       absl::StartsWith(s.error_message(), "no open session has id"));
  if (!gone) return from_grpc(s);
  return absl::UnavailableError(session_gone(s.error_message()));
}

std::string Connection::session_gone(std::string_view cause) const {
  return absl::StrFormat(
      "kad no longer holds session `%s` (kad stopped, restarted or closed it: %s); connect again "
      "for a new session",
      session_id, cause);
}

namespace {
absl::Mutex g_inproc_mu(absl::kConstInit);
InprocChannelFactory* g_inproc ABSL_GUARDED_BY(g_inproc_mu) = nullptr;
}  // namespace

v1::ScalarType to_wire(ScalarType t) {
  return static_cast<v1::ScalarType>(static_cast<int>(t) + 1);  // same order, from 1
}

void to_wire(const Dims& d, google::protobuf::RepeatedField<int64_t>* out) {
  out->Clear();  // keeps its capacity: reused commands do not allocate
  for (int i = 0; i < d.rank; ++i) out->Add(d[i]);
}

void register_inproc(InprocChannelFactory factory) {
  absl::MutexLock lock(&g_inproc_mu);
  delete g_inproc;
  g_inproc = new InprocChannelFactory(std::move(factory));
}

namespace {
// The session stream's completion-queue tags.
void* const kStarted = reinterpret_cast<void*>(1);
void* const kRead = reinterpret_cast<void*>(2);
void* const kFinished = reinterpret_cast<void*>(3);
}  // namespace

grpc::Status Connection::open_session(const v1::OpenSessionRequest& request) {
  session_stream_ = stub->AsyncOpenSession(&session_context, request, &session_queue_, kStarted);
  void* tag = nullptr;
  bool ok = false;
  session_queue_.Next(&tag, &ok);  // kStarted
  if (ok) {
    v1::SessionEvent first;
    session_stream_->Read(&first, kRead);
    session_queue_.Next(&tag, &ok);
    if (ok) {
      session_id = first.session_id();
      absl::MutexLock lock(&session_mu_);
      session_stream_->Read(&session_event_, kRead);
      read_pending_ = true;
      return grpc::Status::OK;
    }
  }
  grpc::Status status;
  session_stream_->Finish(&status, kFinished);
  session_queue_.Next(&tag, &ok);
  session_stream_.reset();
  if (status.ok()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream closed");
  return status;
}

bool Connection::session_lost(absl::Duration grace) const {
  absl::MutexLock lock(&session_mu_);
  const auto deadline = absl::ToChronoTime(absl::Now() + grace);
  while (!lost_ && read_pending_) {
    void* tag = nullptr;
    bool ok = false;
    if (session_queue_.AsyncNext(&tag, &ok, deadline) != grpc::CompletionQueue::GOT_EVENT) break;
    read_pending_ = false;
    if (!ok) {
      lost_ = true;  // the stream ended
      break;
    }
    session_stream_->Read(&session_event_, kRead);  // an event kad sent: read on
    read_pending_ = true;
  }
  return lost_;
}

Connection::~Connection() {
  session_context.TryCancel();
  void* tag = nullptr;
  bool ok = false;
  if (session_stream_) {
    {
      absl::MutexLock lock(&session_mu_);
      if (read_pending_) session_queue_.Next(&tag, &ok);  // the cancelled Read
      read_pending_ = false;
    }
    grpc::Status status;
    session_stream_->Finish(&status, kFinished);
    session_queue_.Next(&tag, &ok);
  }
  session_queue_.Shutdown();
  while (session_queue_.Next(&tag, &ok)) {
  }
  absl::MutexLock lock(&mappings_mu);
  for (auto& [handle, m] : mappings) munmap(m.data, m.bytes);
}

Queue::Queue(std::shared_ptr<Connection> connection, uint64_t handle,
             std::unique_ptr<Transport> transport)
    : connection_(std::move(connection)), handle_(handle), transport_(std::move(transport)) {}
Queue::~Queue() = default;

bool Queue::shared_memory() const { return transport_->shared_memory(); }

absl::StatusOr<LaunchInfo> Queue::launch(const Kernel& kernel, const Dims* ndrange,
                                         const Dims* workgroup, std::span<const Arg> args,
                                         const Dims* offsets) {
  return transport_->launch(kernel, ndrange, workgroup, args, offsets);
}

absl::StatusOr<LaunchInfo> Queue::run(const Kernel& kernel, const Dims* ndrange,
                                      const Dims* workgroup, std::span<const Arg> args,
                                      const Dims* offsets) {
  return transport_->run(kernel, ndrange, workgroup, args, offsets);
}

absl::Status Queue::submit(const Kernel& kernel, const Dims* ndrange, const Dims* workgroup,
                           std::span<const Arg> args, const Dims* offsets) {
  return transport_->submit(kernel, ndrange, workgroup, args, offsets);
}

absl::Status Queue::wait(uint64_t event) { return transport_->wait(event); }

absl::Status Queue::ping() { return transport_->ping(); }

namespace {

absl::Status check_range(const Connection::Mapping& m, uint64_t offset, uint64_t size) {
  uint64_t end;
  if (__builtin_add_overflow(offset, size, &end) || end > m.bytes) {
    return absl::OutOfRangeError(
        absl::StrFormat("range of %d bytes at offset %d does not fit in a buffer of %d bytes", size,
                        offset, m.bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Queue::write(const Buffer& buffer, uint64_t offset, std::span<const std::byte> data) {
  const Connection::Mapping m = connection_->mapping(buffer.handle);
  if (m.data == nullptr) return transport_->write(buffer, offset, data);
  // Zero-copy: once what was submitted before is done, write the device's memory itself.
  if (absl::Status s = check_range(m, offset, data.size()); !s.ok()) return s;
  if (absl::Status s = transport_->wait(0); !s.ok()) return s;
  if (!data.empty()) std::memcpy(m.data + offset, data.data(), data.size());
  return absl::OkStatus();
}

absl::Status Queue::read(const Buffer& buffer, uint64_t offset, std::span<std::byte> data) {
  const Connection::Mapping m = connection_->mapping(buffer.handle);
  if (m.data == nullptr) return transport_->read(buffer, offset, data);
  if (absl::Status s = check_range(m, offset, data.size()); !s.ok()) return s;
  if (absl::Status s = transport_->wait(0); !s.ok()) return s;
  if (!data.empty()) std::memcpy(data.data(), m.data + offset, data.size());
  return absl::OkStatus();
}

}  // namespace client

Client::Client(std::shared_ptr<client::Connection> connection)
    : connection_(std::move(connection)) {}

Client::~Client() = default;

const std::string& Client::session_id() const { return connection_->session_id; }

absl::StatusOr<std::unique_ptr<Client>> Client::connect(absl::string_view uri,
                                                        absl::string_view name) {
  return connect(uri, name, {});
}

namespace {

// ConnectOptions::token, else $KAD_TOKEN, else the first line of $KAD_TOKEN_FILE.
absl::StatusOr<std::string> token_to_send(const client::ConnectOptions& options) {
  if (!options.token.empty()) return options.token;
  if (const char* t = std::getenv("KAD_TOKEN"); t && *t) return std::string(t);
  const char* file = std::getenv("KAD_TOKEN_FILE");
  if (file == nullptr || *file == '\0') return std::string();
  std::ifstream in(file);
  std::string token;
  if (!in || !std::getline(in, token)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("KAD_TOKEN_FILE names %s, which has no token to read", file));
  }
  return std::string(absl::StripAsciiWhitespace(token));
}

// `option`, else the environment variable `variable`.
std::string option_or_env(const std::string& option, const char* variable) {
  if (!option.empty()) return option;
  const char* value = std::getenv(variable);
  return value != nullptr ? value : "";
}

absl::StatusOr<std::string> read_pem(const std::string& path, const char* what) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) text.clear();
  if (text.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("cannot read %s %s", what, path));
  }
  return text;
}

// TLS credentials for tls://: the CA to check kad with, and this client's
// certificate for mutual TLS.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> tls_credentials(
    const client::ConnectOptions& options) {
  grpc::SslCredentialsOptions tls;
  const std::string ca = option_or_env(options.tls_ca_file, "KAD_TLS_CA");
  const std::string cert = option_or_env(options.tls_cert_file, "KAD_TLS_CERT");
  const std::string key = option_or_env(options.tls_key_file, "KAD_TLS_KEY");
  if (!ca.empty()) {
    absl::StatusOr<std::string> pem = read_pem(ca, "the TLS CA file");
    if (!pem.ok()) return pem.status();
    tls.pem_root_certs = *std::move(pem);
  }
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs its key and a key its certificate (tls_cert_file and "
        "tls_key_file, or KAD_TLS_CERT and KAD_TLS_KEY)");
  }
  if (!cert.empty()) {
    absl::StatusOr<std::string> c = read_pem(cert, "the TLS client certificate");
    if (!c.ok()) return c.status();
    absl::StatusOr<std::string> k = read_pem(key, "the TLS client key");
    if (!k.ok()) return k.status();
    tls.pem_cert_chain = *std::move(c);
    tls.pem_private_key = *std::move(k);
  }
  return grpc::SslCredentials(tls);
}

}  // namespace

absl::StatusOr<std::shared_ptr<client::Connection>> client::open_connection(
    absl::string_view uri_in, const client::ConnectOptions& options) {
  std::string uri(uri_in);
  auto connection = std::make_shared<client::Connection>();
  // `?transport=grpc|shm` forces a transport; by default a UNIX socket uses
  // shared memory when kad offers it.
  if (const size_t q = uri.find('?'); q != std::string::npos) {
    const std::string query = uri.substr(q + 1);
    uri.resize(q);
    if (query == "transport=grpc") {
      connection->transport = client::TransportChoice::kGrpc;
    } else if (query == "transport=shm") {
      connection->transport = client::TransportChoice::kShm;
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "URI option `%s` is not supported; use transport=grpc or transport=shm", query));
    }
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(client::kMaxMessage);
  args.SetMaxSendMessageSize(client::kMaxMessage);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
              static_cast<int>(std::clamp<int64_t>(
                  absl::ToInt64Milliseconds(options.keepalive_time), 1000, INT32_MAX)));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              static_cast<int>(std::clamp<int64_t>(
                  absl::ToInt64Milliseconds(options.keepalive_timeout), 1000, INT32_MAX)));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  if (absl::StartsWith(uri, "unix:")) {
    connection->unix_path = uri.substr(5);
    connection->channel = grpc::CreateCustomChannel(uri, grpc::InsecureChannelCredentials(), args);
  } else if (connection->transport == client::TransportChoice::kShm) {
    return absl::InvalidArgumentError(
        absl::StrFormat("`%s`: shared memory needs a local unix: address", uri_in));
  } else if (absl::StartsWith(uri, "tcp://") || absl::StartsWith(uri, "tls://")) {
    connection->tls = absl::StartsWith(uri, "tls://");
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (connection->tls) {
      absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> tls = tls_credentials(options);
      if (!tls.ok()) return tls.status();
      credentials = *std::move(tls);
    }
    connection->channel = grpc::CreateCustomChannel(uri.substr(6), credentials, args);
    absl::StatusOr<std::string> token = token_to_send(options);
    if (!token.ok()) return token.status();
    if (!token->empty()) connection->authorization = absl::StrCat("Bearer ", *token);
  } else if (uri == "inproc:") {
    absl::MutexLock lock(&client::g_inproc_mu);
    if (client::g_inproc == nullptr) {
      return absl::FailedPreconditionError(
          "inproc: needs the engine in this process: link the kad::inproc library");
    }
    connection->channel = (*client::g_inproc)();
    if (connection->channel == nullptr)
      return absl::UnavailableError("inproc: the engine in this process did not start");
  } else {
    return absl::InvalidArgumentError(absl::StrFormat(
        "`%s` is not a kad address: use unix:PATH, tcp://HOST:PORT, tls://HOST:PORT or inproc:",
        uri));
  }
  connection->stub = v1::Kad::NewStub(connection->channel);
  return connection;
}

absl::StatusOr<std::unique_ptr<Client>> Client::connect(absl::string_view uri_in,
                                                        absl::string_view name,
                                                        const client::ConnectOptions& options) {
  absl::StatusOr<std::shared_ptr<client::Connection>> opened =
      client::open_connection(uri_in, options);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<client::Connection> connection = *std::move(opened);

  v1::OpenSessionRequest request;
  request.set_client_name(std::string(name));
  connection->attach(connection->session_context);
  connection->session_context.set_wait_for_ready(false);
  connection->session_context.set_deadline(std::chrono::system_clock::time_point::max());
  if (const grpc::Status opened = connection->open_session(request); !opened.ok()) {
    absl::Status s = client::from_grpc(opened);
    // A handshake that fails is a question of who is who, not of reach:
    // kad's certificate is not the CA's ("certificate verify failed", "Peer
    // name … is not in peer certificate"), or kad refused this client's
    // (it closes the connection in the handshake: "Socket closed").
    if (connection->tls && s.code() == absl::StatusCode::kUnavailable) {
      if (absl::StrContains(s.message(), "andshake") ||
          absl::StrContains(s.message(), "certificate")) {
        return absl::UnauthenticatedError(absl::StrFormat(
            "the TLS handshake with kad at %s failed: kad's certificate is not one the CA "
            "given signed for that address: %s",
            uri_in, s.message()));
      }
      if (absl::StrContains(s.message(), "Socket closed")) {
        const bool has_cert = !option_or_env(options.tls_cert_file, "KAD_TLS_CERT").empty();
        return absl::UnauthenticatedError(absl::StrFormat(
            "the TLS handshake with kad at %s failed: kad closed the connection, as it does for "
            "a client without a certificate its CA signed (mutual TLS; this client gave %s): "
            "%s",
            uri_in, has_cert ? "one" : "none", s.message()));
      }
    }
    // kad's own refusal keeps its code (RESOURCE_EXHAUSTED over a quota,
    // UNAUTHENTICATED); a daemon that cannot be reached is UNAVAILABLE.
    const absl::StatusCode code = s.ok() || s.code() == absl::StatusCode::kUnknown
                                      ? absl::StatusCode::kUnavailable
                                      : s.code();
    return absl::Status(code,
                        absl::StrFormat("cannot open a session with kad at %s: %s", uri_in,
                                        s.ok() ? "the stream closed" : std::string(s.message())));
  }
  return std::unique_ptr<Client>(new Client(std::move(connection)));
}

absl::StatusOr<std::vector<client::DeviceInfo>> Client::devices() {
  grpc::ClientContext context;
  connection_->attach(context);
  v1::ListDevicesResponse response;
  if (auto s = connection_->status_of(connection_->stub->ListDevices(&context, {}, &response));
      !s.ok())
    return s;
  std::vector<client::DeviceInfo> out;
  for (const v1::Device& d : response.devices()) {
    client::DeviceInfo i;
    i.id = d.id();
    i.backend = d.backend();
    i.name = d.name();
    i.vendor = d.vendor();
    i.platform = d.platform();
    i.driver_version = d.driver_version();
    i.is_cpu = d.is_cpu();
    i.is_default = d.is_default();
    i.max_workgroup_size = d.limits().max_workgroup_size();
    for (int k = 0; k < 3 && k < d.limits().max_workgroup_dims_size(); ++k)
      i.max_workgroup_dims[static_cast<size_t>(k)] = d.limits().max_workgroup_dims(k);
    i.compute_units = d.limits().compute_units();
    i.global_memory_bytes = d.limits().global_memory_bytes();
    i.max_allocation_bytes = d.limits().max_allocation_bytes();
    i.local_memory_bytes = d.limits().local_memory_bytes();
    out.push_back(std::move(i));
  }
  return out;
}

absl::StatusOr<client::ServiceStatus> Client::status() {
  grpc::ClientContext context;
  connection_->attach(context);
  v1::GetStatusResponse r;
  if (auto s = connection_->status_of(connection_->stub->GetStatus(&context, {}, &r)); !s.ok())
    return s;
  client::ServiceStatus out;
  out.sessions = r.sessions();
  out.sessions_opened = r.sessions_opened();
  out.sessions_busy = r.sessions_busy();
  out.buffers = r.buffers();
  out.modules = r.modules();
  out.kernels = r.kernels();
  out.queues = r.queues();
  out.cache_entries = r.cache_entries();
  out.cache_hits = r.cache_hits();
  out.cache_compilations = r.cache_compilations();
  out.cache_failures = r.cache_failures();
  out.cache_remembered_failures = r.cache_remembered_failures();
  out.cache_evictions = r.cache_evictions();
  out.cache_max_entries = r.cache_max_entries();
  out.cache_bytes = r.cache_bytes();
  out.cache_max_bytes = r.cache_max_bytes();
  out.launches = r.launches();
  out.queue_depth = r.queue_depth();
  out.channels_lent = r.channels_lent();
  out.channel_loans = r.channel_loans();
  out.lent_launches = r.lent_launches();
  out.draining = r.draining();
  out.workers_running = r.workers_running();
  out.workers_started = r.workers_started();
  out.workers_crashed = r.workers_crashed();
  out.workers_timed_out = r.workers_timed_out();
  out.workers_walls = r.workers_walls();
  out.host_memory_bytes = r.host_memory_bytes();
  out.host_memory_limit = r.host_memory_limit();
  for (const auto& d : r.devices())
    out.devices.push_back({d.device_id(), d.launches(), d.buffers(), d.buffer_bytes(), d.queues(),
                           d.queue_depth(), d.in_flight(), d.held(), d.held_total(),
                           d.contended_depth()});
  for (const auto& t : r.tenants()) {
    client::ServiceStatus::Tenant& tenant = out.tenants.emplace_back();
    tenant.name = t.name();
    tenant.weight = t.weight();
    tenant.priority = t.priority();
    tenant.cpu_nice = t.cpu_nice();
    for (const auto& q : t.quotas())
      tenant.quotas.push_back({q.quota(), q.device_id(), q.used(), q.limit()});
  }
  return out;
}

absl::StatusOr<client::Buffer> Client::allocate(uint64_t bytes, absl::string_view device) {
  grpc::ClientContext context;
  connection_->attach(context);
  v1::AllocateBufferRequest request;
  request.set_device_id(std::string(device));
  request.set_size(bytes);
  v1::AllocateBufferResponse response;
  if (auto s =
          connection_->status_of(connection_->stub->AllocateBuffer(&context, request, &response));
      !s.ok())
    return s;
  client::Buffer buffer{response.buffer(), bytes, false};
  if (response.host_visible() && !connection_->unix_path.empty() &&
      connection_->transport != client::TransportChoice::kGrpc) {
    // Zero-copy when kad shares the memory; copies otherwise.
    auto m = client::map_shared_buffer(*connection_, buffer.handle);
    if (m.ok()) {
      absl::MutexLock lock(&connection_->mappings_mu);
      connection_->mappings[buffer.handle] = *m;
      buffer.mapped = true;
    }
  }
  return buffer;
}

absl::Status Client::free(const client::Buffer& buffer) {
  grpc::ClientContext context;
  connection_->attach(context);
  v1::FreeBufferRequest request;
  request.set_buffer(buffer.handle);
  v1::FreeBufferResponse response;
  absl::Status s =
      connection_->status_of(connection_->stub->FreeBuffer(&context, request, &response));
  if (s.ok()) {
    absl::MutexLock lock(&connection_->mappings_mu);
    if (auto it = connection_->mappings.find(buffer.handle); it != connection_->mappings.end()) {
      munmap(it->second.data, it->second.bytes);
      connection_->mappings.erase(it);
    }
  }
  return s;
}

absl::StatusOr<std::span<std::byte>> Client::map(const client::Buffer& buffer) {
  const client::Connection::Mapping m = connection_->mapping(buffer.handle);
  if (m.data == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "buffer %d is not mapped into this process (a local shared-memory connection and a "
        "host-visible device are needed)",
        buffer.handle));
  }
  return std::span<std::byte>(m.data, m.bytes);
}

absl::StatusOr<client::Module> Client::load_module(absl::string_view source) {
  return load_module(client::ModuleFormat::kOpenClC, source);
}

absl::StatusOr<client::Module> Client::load_module(client::ModuleFormat format,
                                                   absl::string_view bytes) {
  grpc::ClientContext context;
  connection_->attach(context);
  v1::LoadModuleRequest request;
  switch (format) {
    case client::ModuleFormat::kOpenClC:
      request.set_format(v1::MODULE_FORMAT_OPENCL_C);
      break;
    case client::ModuleFormat::kSpirv:
      request.set_format(v1::MODULE_FORMAT_SPIRV);
      break;
    case client::ModuleFormat::kLlvmBitcodeSpir64:
      request.set_format(v1::MODULE_FORMAT_LLVM_BC_SPIR64);
      break;
    case client::ModuleFormat::kPtx:
      request.set_format(v1::MODULE_FORMAT_PTX);
      break;
    case client::ModuleFormat::kCubin:
      request.set_format(v1::MODULE_FORMAT_CUBIN);
      break;
    case client::ModuleFormat::kAmdgcnCodeObject:
      request.set_format(v1::MODULE_FORMAT_AMDGCN);
      break;
  }
  request.set_code(std::string(bytes));
  v1::LoadModuleResponse response;
  if (auto s = connection_->status_of(connection_->stub->LoadModule(&context, request, &response));
      !s.ok())
    return s;
  return client::Module{response.module(), response.digest()};
}

absl::StatusOr<client::Kernel> Client::get_kernel(const client::Module& module,
                                                  const client::KernelSpec& spec) {
  grpc::ClientContext context;
  connection_->attach(context);
  v1::GetKernelRequest request;
  request.set_module(module.handle);
  request.set_entry(spec.entry);
  request.set_build_options(spec.build_options);
  if (spec.static_ndrange) {
    client::to_wire(*spec.static_ndrange, request.mutable_static_ndrange()->mutable_extents());
    if (spec.static_offsets)
      client::to_wire(*spec.static_offsets, request.mutable_static_ndrange()->mutable_offsets());
  }
  if (spec.static_workgroup)
    client::to_wire(*spec.static_workgroup, request.mutable_static_workgroup()->mutable_sizes());
  for (const client::ArgSpec& a : spec.args) {
    v1::ArgSpec* w = request.add_args();
    w->set_kind(static_cast<v1::ArgKind>(static_cast<int>(a.kind) + 1));
    if (a.kind == client::ArgKind::kScalar) w->set_scalar(client::to_wire(a.scalar));
  }
  v1::GetKernelResponse response;
  if (auto s = connection_->status_of(connection_->stub->GetKernel(&context, request, &response));
      !s.ok())
    return s;
  return client::Kernel{response.kernel()};
}

absl::StatusOr<std::unique_ptr<client::Queue>> Client::create_queue(absl::string_view device,
                                                                    absl::Duration launch_timeout) {
  grpc::ClientContext context;
  connection_->attach(context);
  v1::CreateQueueRequest request;
  request.set_device_id(std::string(device));
  if (launch_timeout > absl::ZeroDuration()) {
    request.set_launch_timeout_ms(
        static_cast<uint64_t>(std::max<int64_t>(1, absl::ToInt64Milliseconds(launch_timeout))));
  }
  v1::CreateQueueResponse response;
  if (auto s = connection_->status_of(connection_->stub->CreateQueue(&context, request, &response));
      !s.ok())
    return s;
  const uint64_t queue = response.queue();
  std::unique_ptr<client::Queue> made;
  if (connection_->transport != client::TransportChoice::kGrpc && !connection_->unix_path.empty()) {
    auto shm = client::make_shm_transport(connection_, queue);
    if (shm.ok()) {
      made.reset(new client::Queue(connection_, queue, *std::move(shm)));
    } else if (connection_->transport == client::TransportChoice::kShm) {
      return shm.status();
    }
  }
  if (!made) {
    made.reset(
        new client::Queue(connection_, queue, client::make_grpc_transport(connection_, queue)));
  }
  made->launch_timeout_ = absl::Milliseconds(response.launch_timeout_ms());
  return made;
}

}  // namespace kad
