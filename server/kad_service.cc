#include "server/kad_service.h"

#include <grpc/slice.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "server/queue_dispatch.h"
#include "server/submit_reactor.h"
#include "server/transfer_chunks.h"
#include "server/wire.h"

namespace kad::server {

grpc::Status to_grpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // Both follow google.rpc.Code.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

namespace {
// The index of kad.v1.Kad's `method` among the service's methods: gRPC's
// generated service registers them in the order kad.proto declares them.
int method_index(const char* method) {
  const google::protobuf::ServiceDescriptor* service =
      v1::WriteBufferChunk::descriptor()->file()->FindServiceByName("Kad");
  const google::protobuf::MethodDescriptor* m =
      service != nullptr ? service->FindMethodByName(method) : nullptr;
  if (m == nullptr) {  // kad.proto and this file disagree: a build error, caught by any test
    std::fprintf(stderr, "kad: kad.proto has no method kad.v1.Kad/%s\n", method);
    std::abort();
  }
  return m->index();
}

// A transfer's call ends when its session closes: gRPC cancels it, so that
// a thread blocked reading a chunk the client never sends is given back
// with the session, not only when the client leaves.
class CancelledWithSession {
 public:
  CancelledWithSession(Session& session, grpc::ServerContext& context)
      : session_(session),
        listener_(session.add_close_listener([&context] { context.TryCancel(); })) {}
  ~CancelledWithSession() { session_.remove_close_listener(listener_); }
  CancelledWithSession(const CancelledWithSession&) = delete;
  CancelledWithSession& operator=(const CancelledWithSession&) = delete;

 private:
  Session& session_;
  const uint64_t listener_;
};
}  // namespace

KadService::KadService(Engine& engine, const Authenticator& authenticator,
                       SubmitStreams submit_streams)
    : engine_(engine), authenticator_(authenticator) {
  if (submit_streams == SubmitStreams::kReactors) {
    commands_ = std::make_unique<CommandPool>();
    MarkMethodCallback(
        method_index("Submit"),
        new grpc::internal::CallbackBidiHandler<v1::QueueCommand, v1::QueueReply>(
            [this](grpc::CallbackServerContext* context) { return submit_reactor(context); }));
  }
  // The transfers' handlers take gRPC's bytes. To gRPC's sync server a
  // "streamed" method is a bidirectional stream: on the wire, a client
  // stream (WriteBuffer) and a server stream (ReadBuffer) are the same.
  MarkMethodStreamed(method_index("WriteBuffer"),
                     new grpc::internal::BidiStreamingHandler<KadService, grpc::ByteBuffer,
                                                              v1::WriteBufferResponse>(
                         &KadService::WriteBufferBytes, this));
  MarkMethodStreamed(
      method_index("ReadBuffer"),
      new grpc::internal::BidiStreamingHandler<KadService, grpc::ByteBuffer, grpc::ByteBuffer>(
          &KadService::ReadBufferBytes, this));
}

absl::StatusOr<std::string> KadService::token_tenant(const grpc::ServerContextBase& context) const {
  if (!authenticator_.enabled()) return std::string();
  const auto& metadata = context.client_metadata();
  std::optional<absl::string_view> authorization;
  if (auto it = metadata.find("authorization"); it != metadata.end())
    authorization = absl::string_view(it->second.data(), it->second.size());
  return authenticator_.check(context.peer(), authorization);
}

absl::Status KadService::authenticate(const grpc::ServerContextBase& context) const {
  return token_tenant(context).status();
}

absl::StatusOr<CallerIdentity> KadService::identify(const grpc::ServerContextBase& context) const {
  CallerIdentity caller;
  absl::StatusOr<std::string> tenant = token_tenant(context);
  if (!tenant.ok()) return tenant.status();
  caller.token_tenant = *std::move(tenant);
  // A client certificate that mutual TLS verified.
  if (std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
      auth != nullptr && auth->IsPeerAuthenticated()) {
    for (const grpc::string_ref& subject :
         auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME))
      caller.subject.assign(subject.data(), subject.size());
  }
  caller.uid = peer_uid_ != nullptr ? peer_uid_(context.peer()) : std::nullopt;
  return caller;
}

absl::StatusOr<std::shared_ptr<Session>> KadService::session_of(
    const grpc::ServerContextBase& context) {
  if (absl::Status s = authenticate(context); !s.ok()) return s;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kSessionMetadata);
  if (it == metadata.end()) return engine_.session("");
  return engine_.session(absl::string_view(it->second.data(), it->second.size()));
}

namespace {

// Holds the session open until the client leaves (cancels, disconnects or
// dies) or the server shuts down; then reclaims it.
class SessionReactor final : public grpc::ServerWriteReactor<v1::SessionEvent> {
 public:
  SessionReactor(Engine& engine, std::string id) : engine_(engine), id_(std::move(id)) {
    event_.set_session_id(id_);
    StartWrite(&event_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) end(grpc::Status(grpc::StatusCode::UNAVAILABLE, "session stream broken"));
  }
  void OnCancel() override { end(grpc::Status::CANCELLED); }
  void OnDone() override { delete this; }

 private:
  void end(const grpc::Status& status) {
    if (ended_.exchange(true)) return;
    // On gRPC's callback thread: the close must not wait for the session's kernels.
    engine_.close_session(id_, Engine::CloseWait::kDetached);
    Finish(status);
  }
  Engine& engine_;
  std::string id_;
  v1::SessionEvent event_;
  std::atomic<bool> ended_{false};
};

// Answers an OpenSession that cannot be served (draining, too many sessions).
class RefusedSession final : public grpc::ServerWriteReactor<v1::SessionEvent> {
 public:
  explicit RefusedSession(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerWriteReactor<v1::SessionEvent>* KadService::OpenSession(
    grpc::CallbackServerContext* context, const v1::OpenSessionRequest* request) {
  absl::StatusOr<CallerIdentity> caller = identify(*context);
  if (!caller.ok()) return new RefusedSession(to_grpc(caller.status()));
  absl::StatusOr<std::shared_ptr<Session>> s =
      engine_.open_session(request->client_name(), context->peer(), *caller);
  if (!s.ok()) return new RefusedSession(to_grpc(s.status()));
  return new SessionReactor(engine_, (*s)->id());
}

grpc::Status KadService::ListDevices(grpc::ServerContext* context, const v1::ListDevicesRequest*,
                                     v1::ListDevicesResponse* response) {
  if (absl::Status a = authenticate(*context); !a.ok()) return to_grpc(a);
  const DeviceRegistry& registry = engine_.registry();
  for (const auto& d : registry.devices)
    to_wire(d->info(), d.get() == registry.default_device(), response->add_devices());
  return grpc::Status::OK;
}

grpc::Status KadService::GetStatus(grpc::ServerContext* context, const v1::GetStatusRequest*,
                                   v1::GetStatusResponse* r) {
  absl::StatusOr<CallerIdentity> caller = identify(*context);
  if (!caller.ok()) return to_grpc(caller.status());
  const EngineCounters c = engine_.counters();
  r->set_sessions(c.sessions);
  r->set_sessions_opened(c.sessions_opened);
  r->set_sessions_busy(c.sessions_busy);
  r->set_buffers(c.buffers);
  r->set_modules(c.modules);
  r->set_kernels(c.kernels);
  r->set_queues(c.queues);
  r->set_cache_entries(c.cache.entries);
  r->set_cache_hits(c.cache.hits);
  r->set_cache_compilations(c.cache.compilations);
  r->set_cache_failures(c.cache.failures);
  r->set_cache_remembered_failures(c.cache.remembered_failures);
  r->set_cache_evictions(c.cache.evictions);
  r->set_cache_max_entries(c.cache.max_entries);
  r->set_cache_bytes(c.cache.bytes);
  r->set_cache_max_bytes(c.cache.max_bytes);
  r->set_launches(c.launches);
  r->set_queue_depth(c.queue_depth);
  r->set_channels_lent(c.channels_lent);
  r->set_channel_loans(c.channel_loans);
  r->set_lent_launches(c.lent_launches);
  r->set_draining(c.draining);
  r->set_workers_running(c.workers.running);
  r->set_workers_started(c.workers.started);
  r->set_workers_crashed(c.workers.crashed);
  r->set_workers_timed_out(c.workers.timed_out);
  r->set_workers_walls(c.workers.walls);
  r->set_host_memory_bytes(c.host_memory_bytes);
  r->set_host_memory_limit(c.host_memory_limit);
  for (const auto& d : c.devices) {
    v1::DeviceCounters* w = r->add_devices();
    w->set_device_id(d.id);
    w->set_launches(d.launches);
    w->set_buffers(d.buffers);
    w->set_buffer_bytes(d.buffer_bytes);
    w->set_queues(d.queues);
    w->set_queue_depth(d.queue_depth);
    w->set_in_flight(d.in_flight);
    w->set_held(d.held);
    w->set_held_total(d.held_total);
    w->set_contended_depth(d.contended_depth);
  }
  // Tenants see their own use; kad's operator (its own user or root on the
  // UNIX socket, or the program it runs in) sees everyone's.
  const bool operator_caller = (caller->uid && (*caller->uid == 0 || *caller->uid == geteuid())) ||
                               absl::StartsWith(context->peer(), "inproc");
  const std::string own = operator_caller ? "" : engine_.tenant_of(*caller)->name();
  for (const EngineCounters::TenantUse& t : c.tenants) {
    if (!operator_caller && t.name != own) continue;
    v1::TenantStatus* w = r->add_tenants();
    w->set_name(t.name);
    w->set_weight(t.weight);
    w->set_priority(t.priority);
    w->set_cpu_nice(t.cpu_nice);
    for (const auto& u : t.uses) {
      v1::TenantQuotaUse* q = w->add_quotas();
      q->set_quota(u.quota);
      q->set_device_id(u.device);
      q->set_used(u.used);
      q->set_limit(u.limit);
    }
  }
  return grpc::Status::OK;
}

grpc::Status KadService::AllocateBuffer(grpc::ServerContext* context,
                                        const v1::AllocateBufferRequest* request,
                                        v1::AllocateBufferResponse* response) {
  auto s = session_of(*context);
  if (!s.ok()) return to_grpc(s.status());
  auto b = engine_.allocate_buffer(**s, request->device_id(), request->size());
  if (!b.ok()) return to_grpc(b.status());
  response->set_buffer(b->handle);
  response->set_host_visible(b->host_visible);
  return grpc::Status::OK;
}

grpc::Status KadService::FreeBuffer(grpc::ServerContext* context,
                                    const v1::FreeBufferRequest* request, v1::FreeBufferResponse*) {
  auto s = session_of(*context);
  if (!s.ok()) return to_grpc(s.status());
  return to_grpc(engine_.free_buffer(**s, request->buffer()));
}

grpc::Status KadService::WriteBufferBytes(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::WriteBufferResponse, grpc::ByteBuffer>* stream) {
  auto s = session_of(*context);
  if (!s.ok()) return to_grpc(s.status());
  absl::StatusOr<SessionSlot> slot = transfer_slot(**s);
  if (!slot.ok()) return to_grpc(slot.status());
  const CancelledWithSession ends_with_session(**s, *context);
  WriteChunkReader chunks;
  grpc::ByteBuffer message;
  uint64_t queue = 0, buffer = 0, offset = 0, announced = 0, written = 0;
  bool first = true;
  while (stream->Read(&message)) {
    absl::StatusOr<WriteChunk> chunk = chunks.parse(message);
    if (!chunk.ok()) return to_grpc(chunk.status());
    if (first) {
      queue = chunk->queue;
      buffer = chunk->buffer;
      offset = chunk->offset;
      announced = chunk->size;
      first = false;
      if (announced != 0) {
        if (absl::Status r = engine_.check_buffer_range(**s, buffer, offset, announced); !r.ok())
          return to_grpc(r);
      }
    }
    const uint64_t size = chunk->data_size;
    if (size > kMaxChunkBytes) {
      return to_grpc(absl::InvalidArgumentError(absl::StrFormat(
          "a write chunk of %d bytes exceeds the maximum of %d", size, kMaxChunkBytes)));
    }
    if (announced != 0 && size > announced - written) {
      return to_grpc(absl::InvalidArgumentError(
          absl::StrFormat("WriteBuffer announced %d bytes and sent more", announced)));
    }
    uint64_t at;
    if (__builtin_add_overflow(offset, written, &at)) {
      return to_grpc(absl::OutOfRangeError("write offset overflows"));
    }
    absl::Status st = engine_.write_buffer_pieces(**s, queue, buffer, at, chunk->data);
    if (!st.ok()) return to_grpc(st);
    written += size;
    engine_.requests().count_copied(RequestCounters::Transport::kGrpc, /*to_device=*/true, size);
  }
  if (first) return to_grpc(absl::InvalidArgumentError("WriteBuffer received no chunk"));
  if (announced != 0 && written != announced) {
    return to_grpc(absl::InvalidArgumentError(
        absl::StrFormat("WriteBuffer announced %d bytes and sent %d", announced, written)));
  }
  v1::WriteBufferResponse response;
  response.set_bytes_written(written);
  if (!stream->Write(response)) return grpc::Status(grpc::StatusCode::CANCELLED, "writer left");
  return grpc::Status::OK;
}

grpc::Status KadService::ReadBufferBytes(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
  auto s = session_of(*context);
  if (!s.ok()) return to_grpc(s.status());
  absl::StatusOr<SessionSlot> slot = transfer_slot(**s);
  if (!slot.ok()) return to_grpc(slot.status());
  const CancelledWithSession ends_with_session(**s, *context);
  // Parsed here, not by gRPC, so that bytes that are no request are told
  // apart from none.
  grpc::ByteBuffer bytes;
  if (!stream->Read(&bytes)) {
    return to_grpc(absl::InvalidArgumentError("ReadBuffer received no request"));
  }
  v1::ReadBufferRequest read;
  {
    grpc::ProtoBufferReader reader(&bytes);
    if (!reader.status().ok() || !read.ParseFromZeroCopyStream(&reader)) {
      return to_grpc(absl::InvalidArgumentError(
          absl::StrFormat("ReadBuffer's request of %d bytes does not parse", bytes.Length())));
    }
  }
  const v1::ReadBufferRequest* request = &read;
  if (absl::Status r =
          engine_.check_buffer_range(**s, request->buffer(), request->offset(), request->size());
      !r.ok())
    return to_grpc(r);
  // Checked here too, so that a read of 0 bytes names a missing queue.
  if (absl::Status q = engine_.check_queue(**s, request->queue()); !q.ok()) return to_grpc(q);
  for (uint64_t done = 0; done < request->size();) {
    const uint64_t n = std::min<uint64_t>(kMaxChunkBytes, request->size() - done);
    // Read into a slice of gRPC's that then goes out as it is. Always on
    // the heap: a small slice of grpc_slice_malloc's is held inline, in the
    // struct, which the grpc::Slice below copies.
    grpc_slice data = grpc_slice_malloc_large(n);
    grpc::Slice owned(data, grpc::Slice::STEAL_REF);
    absl::Status st = engine_.read_buffer(
        **s, request->queue(), request->buffer(), request->offset() + done,
        std::span<std::byte>(reinterpret_cast<std::byte*>(GRPC_SLICE_START_PTR(data)), n));
    if (!st.ok()) return to_grpc(st);
    if (!stream->Write(buffer_chunk(std::move(owned))))
      return grpc::Status(grpc::StatusCode::CANCELLED, "reader left");
    done += n;
    engine_.requests().count_copied(RequestCounters::Transport::kGrpc, /*to_device=*/false, n);
  }
  return grpc::Status::OK;
}

grpc::Status KadService::LoadModule(grpc::ServerContext* context,
                                    const v1::LoadModuleRequest* request,
                                    v1::LoadModuleResponse* response) {
  auto s = session_of(*context);
  if (!s.ok()) return to_grpc(s.status());
  absl::StatusOr<ModuleFormat> format = to_module_format(request->format());
  if (!format.ok()) return to_grpc(format.status());
  auto m = engine_.load_module(**s, *format, request->code());
  if (!m.ok()) return to_grpc(m.status());
  response->set_module(m->handle);
  response->set_digest(m->digest);
  return grpc::Status::OK;
}

grpc::Status KadService::GetKernel(grpc::ServerContext* context,
                                   const v1::GetKernelRequest* request,
                                   v1::GetKernelResponse* response) {
  auto s = session_of(*context);
  if (!s.ok()) return to_grpc(s.status());
  absl::StatusOr<KernelSignature> sig = to_signature(*request);
  if (!sig.ok()) return to_grpc(sig.status());
  absl::StatusOr<uint64_t> k = engine_.get_kernel(**s, request->module(), *std::move(sig));
  if (!k.ok()) return to_grpc(k.status());
  response->set_kernel(*k);
  return grpc::Status::OK;
}

grpc::Status KadService::CreateQueue(grpc::ServerContext* context,
                                     const v1::CreateQueueRequest* request,
                                     v1::CreateQueueResponse* response) {
  auto s = session_of(*context);
  if (!s.ok()) return to_grpc(s.status());
  absl::Duration timeout;
  absl::StatusOr<uint64_t> q = engine_.create_queue(
      **s, request->device_id(),
      absl::Milliseconds(std::min<uint64_t>(request->launch_timeout_ms(), uint64_t{1} << 40)),
      &timeout);
  if (!q.ok()) return to_grpc(q.status());
  response->set_queue(*q);
  response->set_launch_timeout_ms(static_cast<uint64_t>(absl::ToInt64Milliseconds(timeout)));
  return grpc::Status::OK;
}

void KadService::reset_reply(v1::QueueReply* reply) {
  reply->set_tag(0);
  reply->set_code(0);
  reply->clear_message();  // keeps the string's capacity
  reply->set_event(0);
  if (reply->has_choice()) reply->mutable_choice()->Clear();  // scalars only: nothing freed
  reply->clear_workgroup();
  reply->clear_data();
  reply->set_failed_index(0);
}

namespace {

// Decodes a wire launch into `out`, which holds the storage its request
// points into. Allocates nothing unless it fails.
absl::Status decode_launch(const v1::Launch& l, uint64_t queue, DecodedLaunch* out) {
  if (l.args_size() > static_cast<int>(kMaxKernelArgs)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a launch has %d arguments, more than the maximum of %d", l.args_size(), kMaxKernelArgs));
  }
  absl::Status status;
  if (l.has_ndrange()) status = to_ndrange(l.ndrange(), &out->ndrange);
  if (status.ok() && l.has_workgroup()) status = to_dims(l.workgroup(), &out->workgroup);
  for (int i = 0; status.ok() && i < l.args_size(); ++i)
    status = to_kernel_arg(l.args(i), static_cast<size_t>(i), &out->args[static_cast<size_t>(i)]);
  out->request = {queue, l.kernel(), l.has_ndrange() ? &out->ndrange : nullptr,
                  l.has_workgroup() ? &out->workgroup : nullptr,
                  std::span<const KernelArg>(out->args.data(), static_cast<size_t>(l.args_size()))};
  return status;
}

void set_launched(const LaunchResult& launched, v1::QueueReply* reply) {
  reply->set_event(launched.event);
  v1::LaunchChoice* choice = reply->mutable_choice();
  choice->set_rank(launched.choice.rank);
  choice->set_linear(launched.choice.linear);
  choice->set_index_bits(launched.choice.index_bits);
  reply->clear_workgroup();
  for (int d = 0; d < launched.workgroup.rank; ++d) reply->add_workgroup(launched.workgroup[d]);
}

void set_status(const absl::Status& status, v1::QueueReply* reply) {
  reply->set_code(static_cast<int32_t>(status.code()));
  if (!status.ok()) reply->set_message(std::string(status.message()));
}

}  // namespace

void KadService::run_batch(Session& session, uint64_t queue, const v1::LaunchBatch& batch,
                           v1::QueueReply* reply) {
  const int n = batch.launches_size();
  if (n > static_cast<int>(kMaxBatchLaunches)) {
    return set_status(absl::InvalidArgumentError(absl::StrFormat(
                          "a batch of %d launches exceeds the maximum of %d; none was run", n,
                          kMaxBatchLaunches)),
                      reply);
  }
  // Each launch runs as if it had been sent alone; the first failure is the
  // batch's answer, naming its launch.
  absl::Status first;
  DecodedLaunch decoded;
  for (int i = 0; i < n; ++i) {
    QueueOp op;
    op.kind = QueueOp::Kind::kLaunch;
    op.launch = &decoded.request;
    QueueOpResult result;
    absl::Status status = decode_launch(batch.launches(i), queue, &decoded);
    if (status.ok())
      status =
          run_queue_op(engine_, session, queue, op, RequestCounters::Transport::kGrpc, &result);
    if (result.launched) reply->set_event(result.launch.event);
    if (!status.ok() && first.ok()) {
      first = absl::Status(
          status.code(), absl::StrFormat("launch %d of a batch of %d: %s", i, n, status.message()));
      reply->set_failed_index(static_cast<uint32_t>(i));
    }
  }
  set_status(first, reply);
}

void KadService::run_stream_command(Session& session, uint64_t& queue,
                                    const v1::QueueCommand& command, v1::QueueReply* reply) {
  reset_reply(reply);
  reply->set_tag(command.tag());
  if (queue == 0) queue = command.queue();
  if (command.queue() != 0 && command.queue() != queue) {
    reply->set_code(static_cast<int32_t>(absl::StatusCode::kInvalidArgument));
    reply->set_message(absl::StrFormat("this stream is bound to queue %d; command names queue %d",
                                       queue, command.queue()));
    return;
  }
  run_command(session, queue, command, reply);
}

void KadService::run_command(Session& session, uint64_t queue, const v1::QueueCommand& command,
                             v1::QueueReply* reply) {
  // Decoded here; what the command does is run_queue_op's, shared with the
  // shared-memory channel.
  absl::Status status;
  QueueOp op;
  DecodedLaunch decoded;
  switch (command.command_case()) {
    case v1::QueueCommand::kLaunch:
    case v1::QueueCommand::kRun: {
      const bool run = command.command_case() == v1::QueueCommand::kRun;
      status = decode_launch(run ? command.run() : command.launch(), queue, &decoded);
      op.kind = run ? QueueOp::Kind::kRun : QueueOp::Kind::kLaunch;
      op.launch = &decoded.request;
      break;
    }
    case v1::QueueCommand::kBatch:
      return run_batch(session, queue, command.batch(), reply);
    case v1::QueueCommand::kWait:
      op.kind = QueueOp::Kind::kWait;
      op.event = command.wait().event();
      break;
    case v1::QueueCommand::kCopyIn: {
      const v1::CopyIn& c = command.copy_in();
      if (c.data().size() > kMaxChunkBytes) {
        status = absl::InvalidArgumentError(
            absl::StrFormat("copy_in of %d bytes exceeds the maximum of %d; use WriteBuffer",
                            c.data().size(), kMaxChunkBytes));
        break;
      }
      op.kind = QueueOp::Kind::kCopyIn;
      op.buffer = c.buffer();
      op.offset = c.offset();
      op.in = std::span<const std::byte>(reinterpret_cast<const std::byte*>(c.data().data()),
                                         c.data().size());
      break;
    }
    case v1::QueueCommand::kCopyOut: {
      const v1::CopyOut& c = command.copy_out();
      if (c.size() > kMaxChunkBytes) {
        status = absl::InvalidArgumentError(
            absl::StrFormat("copy_out of %d bytes exceeds the maximum of %d; use ReadBuffer",
                            c.size(), kMaxChunkBytes));
        break;
      }
      std::string* data = reply->mutable_data();
      data->resize(c.size());
      op.kind = QueueOp::Kind::kCopyOut;
      op.buffer = c.buffer();
      op.offset = c.offset();
      op.out = std::span<std::byte>(reinterpret_cast<std::byte*>(data->data()), data->size());
      break;
    }
    case v1::QueueCommand::kPing:
      break;
    case v1::QueueCommand::COMMAND_NOT_SET:
      status = absl::InvalidArgumentError(
          "queue command has no launch, run, batch, wait, copy_in, copy_out or ping");
      break;
  }
  QueueOpResult result;
  if (status.ok())
    status = run_queue_op(engine_, session, queue, op, RequestCounters::Transport::kGrpc, &result);
  if (!status.ok() && op.kind == QueueOp::Kind::kCopyOut) reply->clear_data();
  if (result.launched) set_launched(result.launch, reply);
  if (!status.ok()) engine_.requests().count_command(status.code());
  set_status(status, reply);
}

namespace {

// Replies of one Submit stream. Over a socket, the thread that ran the
// command writes its reply at once (write_now): no hop to another thread, so
// a round trip costs what a bare gRPC stream's does. A client may leave
// answers unread (Queue::kMaxInFlight at most, a few KB, within HTTP/2's
// window), so such a write does not wait for it. The in-process transport's
// writes complete only when the other side reads, so there replies go
// through the ring, written by the stream's writer thread, and reading
// commands never waits for the client to read answers. The writer thread
// also sends the last reply when the session closes; over a socket, where
// there is no writer thread, a thread started then sends it. Slots are
// reused messages: no allocation per reply once warm.
class ReplyRing {
 public:
  using Stream = grpc::ServerReaderWriter<v1::QueueReply, v1::QueueCommand>;

  ~ReplyRing() {
    if (ender_.joinable()) ender_.join();
  }

  // Writes `reply` from the calling thread; false when the stream is
  // broken or its session has ended (the reply is then discarded).
  bool write_now(grpc::ServerReaderWriter<v1::QueueReply, v1::QueueCommand>* stream,
                 const v1::QueueReply& reply) {
    absl::MutexLock write_lock(&write_mu_);
    {
      absl::MutexLock lock(&mu_);
      if (broken_ || session_closed_) return false;
    }
    if (stream->Write(reply)) return true;
    absl::MutexLock lock(&mu_);
    broken_ = true;  // the client left
    return false;
  }

  static constexpr size_t kSlots = 1024;  // more than any client leaves unread

  // The slot for the next reply; blocks while the ring is full.
  v1::QueueReply* next_slot() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &ReplyRing::has_room));
    return &slots_[tail_ % kSlots];
  }
  void publish() {
    absl::MutexLock lock(&mu_);
    ++tail_;
  }
  void close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  // The session closed: after the reply being written, the writer sends one
  // last reply (tag 0, ABORTED, saying why), cancels the stream and discards
  // the rest. Does not block (a session close listener).
  void end_with_session() {
    absl::MutexLock lock(&mu_);
    session_closed_ = true;
  }
  // The same for a stream without a writer thread (write_now): a thread of
  // its own sends the last reply, once the one being written has gone.
  // Does not block either; the ring's destructor joins that thread.
  void end_with_session_now(grpc::ServerContext* context, Stream* stream) {
    {
      absl::MutexLock lock(&mu_);
      if (session_closed_) return;
      session_closed_ = true;
    }
    try {
      ender_ = std::thread([this, context, stream] {
        absl::MutexLock write_lock(&write_mu_);
        write_last(context, stream);
      });
    } catch (const std::system_error&) {
      context->TryCancel();  // no thread to be had: the stream ends without its last reply
    }
  }
  // Runs on the writer thread until close() and every reply is written.
  void drain_to(grpc::ServerContext* context,
                grpc::ServerReaderWriter<v1::QueueReply, v1::QueueCommand>* stream) {
    for (;;) {
      v1::QueueReply* reply = nullptr;
      bool session_ended = false, broken = false;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &ReplyRing::has_work_or_closed));
        if (session_closed_ && !broken_) {
          broken_ = true;
          session_ended = true;
        } else if (head_ == tail_) {
          return;  // closed and drained
        } else {
          reply = &slots_[head_ % kSlots];
          broken = broken_;
        }
      }
      absl::MutexLock write_lock(&write_mu_);  // after a reply being written now
      if (session_ended) {
        write_last(context, stream);
        continue;
      }
      const bool written = broken ? false : stream->Write(*reply);
      absl::MutexLock lock(&mu_);
      if (!written) broken_ = true;  // the client left: discard the rest
      ++head_;
    }
  }

 private:
  // The session's end: the last reply, then the stream is cancelled (its
  // Read() in Submit returns, and the handler ends).
  static void write_last(grpc::ServerContext* context, Stream* stream) {
    v1::QueueReply last;
    last.set_code(static_cast<int32_t>(absl::StatusCode::kAborted));
    last.set_message("the session this stream belongs to has closed: the stream ends");
    stream->Write(last);
    context->TryCancel();
  }
  bool has_room() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return tail_ - head_ < kSlots; }
  bool has_work_or_closed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return head_ != tail_ || closed_ || (session_closed_ && !broken_);
  }
  absl::Mutex write_mu_;  // one write on the stream at a time; taken before mu_
  absl::Mutex mu_;
  std::array<v1::QueueReply, kSlots> slots_;
  std::thread ender_;                       // end_with_session_now's
  uint64_t head_ ABSL_GUARDED_BY(mu_) = 0;  // next to write
  uint64_t tail_ ABSL_GUARDED_BY(mu_) = 0;  // next to fill
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool session_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // the client left, or the session closed
};

}  // namespace

absl::StatusOr<SessionSlot> KadService::transfer_slot(Session& session) {
  return SessionSlot::take(session.transfers, engine_.limits().max_transfers_per_session,
                           "transfers (WriteBuffer, ReadBuffer)", "--max-transfers-per-session",
                           nullptr, Quota::kStreams);
}

absl::StatusOr<SessionSlot> KadService::stream_slot(Session& session) {
  return SessionSlot::take(session.streams, engine_.limits().max_streams_per_session,
                           "Submit streams", "--max-streams-per-session", session.tenant(),
                           Quota::kStreams);
}

grpc::ServerBidiReactor<v1::QueueCommand, v1::QueueReply>* KadService::submit_reactor(
    grpc::CallbackServerContext* context) {
  absl::StatusOr<std::shared_ptr<Session>> s = session_of(*context);
  absl::StatusOr<SessionSlot> slot = s.ok() ? stream_slot(**s) : s.status();
  if (!slot.ok()) {
    // Refused: the stream ends at once with the reason.
    class Refused final : public grpc::ServerBidiReactor<v1::QueueCommand, v1::QueueReply> {
     public:
      explicit Refused(const grpc::Status& status) { Finish(status); }
      void OnDone() override { delete this; }
    };
    return new Refused(to_grpc(slot.status()));
  }
  return new SubmitReactor(*this, *commands_, *std::move(s), *std::move(slot));
}

grpc::Status KadService::Submit(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::QueueReply, v1::QueueCommand>* stream) {
  auto s = session_of(*context);
  if (!s.ok()) return to_grpc(s.status());
  absl::StatusOr<SessionSlot> slot = stream_slot(**s);
  if (!slot.ok()) return to_grpc(slot.status());
  // A socket's peer (gRPC names it by address, or `fd:N` for the UNIX
  // connections kad accepts itself); the in-process channel's is "unknown".
  const std::string peer = context->peer();
  const bool write_now = absl::StartsWith(peer, "ipv4:") || absl::StartsWith(peer, "ipv6:") ||
                         absl::StartsWith(peer, "unix:") || absl::StartsWith(peer, "fd:");
  auto ring = std::make_unique<ReplyRing>();
  // Only the in-process channel's stream has a writer thread.
  std::thread writer;
  if (!write_now) writer = std::thread([&] { ring->drain_to(context, stream); });
  ReplyRing* const ring_ptr = ring.get();
  const uint64_t listener = (*s)->add_close_listener([ring_ptr, write_now, context, stream] {
    if (write_now) {
      ring_ptr->end_with_session_now(context, stream);
    } else {
      ring_ptr->end_with_session();
    }
  });
  v1::QueueCommand command;
  v1::QueueReply own_reply;  // write_now's, reused
  uint64_t queue = 0;
  while (stream->Read(&command)) {
    v1::QueueReply& reply = write_now ? own_reply : *ring->next_slot();
    run_stream_command(**s, queue, command, &reply);
    if (write_now) {
      ring->write_now(stream, reply);  // a broken stream's Read fails next
    } else {
      ring->publish();
    }
  }
  (*s)->remove_close_listener(listener);
  ring->close();
  if (writer.joinable()) writer.join();
  return grpc::Status::OK;
}

}  // namespace kad::server
