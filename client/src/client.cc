#include "kad/client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "kad/inproc.h"
#include "kad/v1/kad.grpc.pb.h"

namespace kad {
namespace client {
namespace {

constexpr uint64_t kChunk = 1 << 20;  // the daemon's largest copy or chunk
constexpr int kMaxMessage = (4 << 20) + (64 << 10);

absl::Status from_grpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

absl::Mutex g_inproc_mu(absl::kConstInit);
InprocChannelFactory* g_inproc ABSL_GUARDED_BY(g_inproc_mu) = nullptr;

v1::ScalarType to_wire(ScalarType t) {
  return static_cast<v1::ScalarType>(static_cast<int>(t) + 1);  // same order, from 1
}

void to_wire(const Dims& d, google::protobuf::RepeatedField<int64_t>* out) {
  for (int i = 0; i < d.rank; ++i) out->Add(d[i]);
}

}  // namespace

void register_inproc(InprocChannelFactory factory) {
  absl::MutexLock lock(&g_inproc_mu);
  delete g_inproc;
  g_inproc = new InprocChannelFactory(std::move(factory));
}

// The channel, the stub and the session, shared by the client and its queues.
class Connection {
 public:
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Kad::Stub> stub;
  std::string session_id;
  grpc::ClientContext session_context;  // the open OpenSession stream
  std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> session_stream;

  void attach(grpc::ClientContext& context) const {
    context.AddMetadata("kad-session", session_id);
  }
  ~Connection() {
    session_context.TryCancel();
    if (session_stream) session_stream->Finish().ok();
  }
};

struct Queue::Stream {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::QueueCommand, v1::QueueReply>> rw;
  v1::QueueCommand command;  // reused: no allocation per launch once warm
  v1::QueueReply reply;
};

Queue::Queue(std::shared_ptr<Connection> connection, uint64_t handle)
    : connection_(std::move(connection)), handle_(handle), stream_(new Stream) {
  connection_->attach(stream_->context);
  stream_->rw = connection_->stub->Submit(&stream_->context);
}

Queue::~Queue() {
  while (pending_ > 0 && read_pending().ok()) {
  }
  if (stream_ && stream_->rw) {
    stream_->rw->WritesDone();
    stream_->rw->Finish().ok();
  }
}

absl::Status Queue::roundtrip() {
  v1::QueueCommand& command = stream_->command;
  v1::QueueReply& reply = stream_->reply;
  command.set_queue(handle_);
  command.set_tag(next_tag_++);
  if (!stream_->rw->Write(command)) {
    absl::Status s = from_grpc(stream_->rw->Finish());
    return s.ok() ? absl::UnavailableError("the queue's stream to kad closed") : s;
  }
  while (pending_ > 0) {  // answers to submitted launches come first, in order
    if (absl::Status s = read_pending(); !s.ok()) return s;
  }
  if (!stream_->rw->Read(&reply)) {
    absl::Status s = from_grpc(stream_->rw->Finish());
    return s.ok() ? absl::UnavailableError("the queue's stream to kad closed") : s;
  }
  if (reply.tag() != command.tag()) {
    return absl::InternalError(absl::StrFormat("kad answered command %d with the reply to %d",
                                               command.tag(), reply.tag()));
  }
  if (reply.code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(reply.code()), reply.message());
  }
  return absl::OkStatus();
}

void Queue::encode_launch(const Kernel& kernel, const Dims* ndrange, const Dims* workgroup,
                          std::span<const Arg> args, const Dims* offsets) {
  v1::QueueCommand& command = stream_->command;
  command.Clear();
  v1::Launch* l = command.mutable_launch();
  l->set_kernel(kernel.handle);
  if (ndrange) {
    to_wire(*ndrange, l->mutable_ndrange()->mutable_extents());
    if (offsets) to_wire(*offsets, l->mutable_ndrange()->mutable_offsets());
  }
  if (workgroup) to_wire(*workgroup, l->mutable_workgroup()->mutable_sizes());
  for (const Arg& a : args) {
    v1::KernelArg* w = l->add_args();
    switch (a.kind()) {
      case Arg::Kind::kBuffer: w->set_buffer(a.value()); break;
      case Arg::Kind::kLocal: w->set_local_bytes(a.value()); break;
      case Arg::Kind::kScalar:
        w->set_scalar_bits(a.value());
        w->set_scalar(to_wire(a.scalar_type()));
        break;
    }
  }
}

absl::Status Queue::read_pending() {
  v1::QueueReply& reply = stream_->reply;
  if (!stream_->rw->Read(&reply)) {
    pending_ = 0;
    absl::Status s = from_grpc(stream_->rw->Finish());
    return s.ok() ? absl::UnavailableError("the queue's stream to kad closed") : s;
  }
  --pending_;
  if (reply.code() != 0 && deferred_.ok()) {
    deferred_ = absl::Status(static_cast<absl::StatusCode>(reply.code()),
                             absl::StrCat("a submitted launch failed: ", reply.message()));
  }
  return absl::OkStatus();
}

absl::Status Queue::submit(const Kernel& kernel, const Dims* ndrange, const Dims* workgroup,
                           std::span<const Arg> args, const Dims* offsets) {
  if (pending_ >= kMaxInFlight) {
    if (absl::Status s = read_pending(); !s.ok()) return s;
  }
  encode_launch(kernel, ndrange, workgroup, args, offsets);
  v1::QueueCommand& command = stream_->command;
  command.set_queue(handle_);
  command.set_tag(next_tag_++);
  if (!stream_->rw->Write(command)) {
    absl::Status s = from_grpc(stream_->rw->Finish());
    return s.ok() ? absl::UnavailableError("the queue's stream to kad closed") : s;
  }
  ++pending_;
  return absl::OkStatus();
}

absl::StatusOr<LaunchInfo> Queue::launch(const Kernel& kernel, const Dims* ndrange,
                                         const Dims* workgroup, std::span<const Arg> args,
                                         const Dims* offsets) {
  encode_launch(kernel, ndrange, workgroup, args, offsets);
  if (absl::Status s = roundtrip(); !s.ok()) return s;
  const v1::QueueReply& r = stream_->reply;
  LaunchInfo info;
  info.event = r.event();
  info.linear = r.choice().linear();
  info.index_bits = static_cast<int>(r.choice().index_bits());
  info.rank = static_cast<int>(r.choice().rank());
  for (int64_t w : r.workgroup())
    if (info.workgroup.rank < kMaxRank) info.workgroup.v[static_cast<size_t>(info.workgroup.rank++)] = w;
  return info;
}

absl::Status Queue::wait(uint64_t event) {
  v1::QueueCommand& command = stream_->command;
  command.Clear();
  command.mutable_wait()->set_event(event);
  absl::Status s = roundtrip();
  if (!deferred_.ok()) {
    absl::Status first = deferred_;
    deferred_ = absl::OkStatus();
    return first;
  }
  return s;
}

absl::Status Queue::write(const Buffer& buffer, uint64_t offset, std::span<const std::byte> data) {
  if (data.size() <= kChunk) {
    v1::QueueCommand& command = stream_->command;
    command.Clear();
    v1::CopyIn* c = command.mutable_copy_in();
    c->set_buffer(buffer.handle);
    c->set_offset(offset);
    c->set_data(reinterpret_cast<const char*>(data.data()), data.size());
    return roundtrip();
  }
  grpc::ClientContext context;
  connection_->attach(context);
  v1::WriteBufferResponse response;
  auto writer = connection_->stub->WriteBuffer(&context, &response);
  v1::WriteBufferChunk chunk;
  chunk.set_queue(handle_);
  chunk.set_buffer(buffer.handle);
  chunk.set_offset(offset);
  for (size_t done = 0; done < data.size();) {
    const size_t n = std::min<size_t>(kChunk, data.size() - done);
    chunk.set_data(reinterpret_cast<const char*>(data.data()) + done, n);
    if (!writer->Write(chunk)) break;
    chunk.clear_queue();
    chunk.clear_buffer();
    chunk.clear_offset();
    done += n;
  }
  writer->WritesDone();
  return from_grpc(writer->Finish());
}

absl::Status Queue::read(const Buffer& buffer, uint64_t offset, std::span<std::byte> data) {
  if (data.size() <= kChunk) {
    v1::QueueCommand& command = stream_->command;
    command.Clear();
    v1::CopyOut* c = command.mutable_copy_out();
    c->set_buffer(buffer.handle);
    c->set_offset(offset);
    c->set_size(data.size());
    if (absl::Status s = roundtrip(); !s.ok()) return s;
    if (stream_->reply.data().size() != data.size()) {
      return absl::InternalError("kad returned a copy of the wrong size");
    }
    std::memcpy(data.data(), stream_->reply.data().data(), data.size());
    return absl::OkStatus();
  }
  grpc::ClientContext context;
  connection_->attach(context);
  v1::ReadBufferRequest request;
  request.set_queue(handle_);
  request.set_buffer(buffer.handle);
  request.set_offset(offset);
  request.set_size(data.size());
  auto reader = connection_->stub->ReadBuffer(&context, request);
  v1::BufferChunk chunk;
  size_t done = 0;
  while (reader->Read(&chunk)) {
    const std::string& d = chunk.data();
    if (d.size() > data.size() - done) {
      context.TryCancel();
      reader->Finish().ok();
      return absl::InternalError("kad returned more data than asked for");
    }
    std::memcpy(data.data() + done, d.data(), d.size());
    done += d.size();
  }
  absl::Status s = from_grpc(reader->Finish());
  if (s.ok() && done != data.size()) {
    return absl::InternalError(
        absl::StrFormat("kad returned %d of %d bytes", done, data.size()));
  }
  return s;
}

}  // namespace client

Client::Client(std::shared_ptr<client::Connection> connection)
    : connection_(std::move(connection)) {}

Client::~Client() = default;

const std::string& Client::session_id() const { return connection_->session_id; }

absl::StatusOr<std::unique_ptr<Client>> Client::connect(absl::string_view uri_in,
                                                        absl::string_view name) {
  std::string uri(uri_in);
  // Transport selection (`?transport=grpc|shm`): only gRPC exists so far.
  if (const size_t q = uri.find('?'); q != std::string::npos) {
    const std::string query = uri.substr(q + 1);
    uri.resize(q);
    if (query != "transport=grpc") {
      return absl::InvalidArgumentError(
          absl::StrFormat("URI option `%s` is not supported; use transport=grpc", query));
    }
  }
  auto connection = std::make_shared<client::Connection>();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(client::kMaxMessage);
  args.SetMaxSendMessageSize(client::kMaxMessage);
  if (absl::StartsWith(uri, "unix:")) {
    connection->channel =
        grpc::CreateCustomChannel(uri, grpc::InsecureChannelCredentials(), args);
  } else if (absl::StartsWith(uri, "tcp://")) {
    connection->channel =
        grpc::CreateCustomChannel(uri.substr(6), grpc::InsecureChannelCredentials(), args);
  } else if (uri == "inproc:") {
    absl::MutexLock lock(&client::g_inproc_mu);
    if (client::g_inproc == nullptr) {
      return absl::FailedPreconditionError(
          "inproc: needs the engine in this process: link the kad::inproc library");
    }
    connection->channel = (*client::g_inproc)();
  } else {
    return absl::InvalidArgumentError(absl::StrFormat(
        "`%s` is not a kad address: use unix:PATH, tcp://HOST:PORT or inproc:", uri));
  }
  connection->stub = v1::Kad::NewStub(connection->channel);

  v1::OpenSessionRequest request;
  request.set_client_name(std::string(name));
  connection->session_context.set_wait_for_ready(false);
  connection->session_context.set_deadline(std::chrono::system_clock::time_point::max());
  connection->session_stream =
      connection->stub->OpenSession(&connection->session_context, request);
  v1::SessionEvent first;
  if (!connection->session_stream->Read(&first)) {
    absl::Status s = client::from_grpc(connection->session_stream->Finish());
    connection->session_stream.reset();
    return absl::UnavailableError(
        absl::StrFormat("cannot open a session with kad at %s: %s", uri_in,
                        s.ok() ? "the stream closed" : std::string(s.message())));
  }
  connection->session_id = first.session_id();
  return std::unique_ptr<Client>(new Client(std::move(connection)));
}

absl::StatusOr<std::vector<client::DeviceInfo>> Client::devices() {
  grpc::ClientContext context;
  v1::ListDevicesResponse response;
  if (auto s = client::from_grpc(connection_->stub->ListDevices(&context, {}, &response)); !s.ok())
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
  v1::GetStatusResponse r;
  if (auto s = client::from_grpc(connection_->stub->GetStatus(&context, {}, &r)); !s.ok()) return s;
  client::ServiceStatus out;
  out.sessions = r.sessions();
  out.sessions_opened = r.sessions_opened();
  out.buffers = r.buffers();
  out.modules = r.modules();
  out.kernels = r.kernels();
  out.queues = r.queues();
  out.cache_entries = r.cache_entries();
  out.cache_hits = r.cache_hits();
  out.cache_compilations = r.cache_compilations();
  out.launches = r.launches();
  out.queue_depth = r.queue_depth();
  out.draining = r.draining();
  for (const auto& d : r.devices())
    out.devices.push_back({d.device_id(), d.launches(), d.buffers(), d.buffer_bytes(), d.queues()});
  return out;
}

absl::StatusOr<client::Buffer> Client::allocate(uint64_t bytes, absl::string_view device) {
  grpc::ClientContext context;
  connection_->attach(context);
  v1::AllocateBufferRequest request;
  request.set_device_id(std::string(device));
  request.set_size(bytes);
  v1::AllocateBufferResponse response;
  if (auto s = client::from_grpc(connection_->stub->AllocateBuffer(&context, request, &response));
      !s.ok())
    return s;
  return client::Buffer{response.buffer(), bytes};
}

absl::Status Client::free(const client::Buffer& buffer) {
  grpc::ClientContext context;
  connection_->attach(context);
  v1::FreeBufferRequest request;
  request.set_buffer(buffer.handle);
  v1::FreeBufferResponse response;
  return client::from_grpc(connection_->stub->FreeBuffer(&context, request, &response));
}

absl::StatusOr<client::Module> Client::load_module(absl::string_view source) {
  grpc::ClientContext context;
  connection_->attach(context);
  v1::LoadModuleRequest request;
  request.set_format(v1::MODULE_FORMAT_OPENCL_C);
  request.set_code(std::string(source));
  v1::LoadModuleResponse response;
  if (auto s = client::from_grpc(connection_->stub->LoadModule(&context, request, &response));
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
  if (auto s = client::from_grpc(connection_->stub->GetKernel(&context, request, &response));
      !s.ok())
    return s;
  return client::Kernel{response.kernel()};
}

absl::StatusOr<std::unique_ptr<client::Queue>> Client::create_queue(absl::string_view device) {
  grpc::ClientContext context;
  connection_->attach(context);
  v1::CreateQueueRequest request;
  request.set_device_id(std::string(device));
  v1::CreateQueueResponse response;
  if (auto s = client::from_grpc(connection_->stub->CreateQueue(&context, request, &response));
      !s.ok())
    return s;
  return std::unique_ptr<client::Queue>(new client::Queue(connection_, response.queue()));
}

}  // namespace kad
