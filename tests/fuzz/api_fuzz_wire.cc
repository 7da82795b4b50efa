#include "tests/fuzz/api_fuzz_wire.h"

#include <sys/wait.h>

#include <cstring>
#include <vector>

#include "tests/fuzz/api_fuzz_kernels.h"
#include "tests/fuzz/api_fuzz_spec.h"

namespace kad::api_fuzz {
namespace {

std::string status_text(const grpc::Status& s) {
  return code_name(s.error_code()) + ": " + s.error_message();
}

void shorten_strings(google::protobuf::Message* message) {
  using google::protobuf::FieldDescriptor;
  constexpr size_t kKeep = 40;
  const auto* descriptor = message->GetDescriptor();
  const auto* reflection = message->GetReflection();
  auto shortened = [&](const std::string& v) {
    return v.size() <= kKeep ? v
                             : v.substr(0, kKeep) + "...(" + std::to_string(v.size()) + " bytes)";
  };
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* f = descriptor->field(i);
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      if (f->is_repeated()) {
        for (int j = 0; j < reflection->FieldSize(*message, f); ++j)
          reflection->SetRepeatedString(message, f, j,
                                        shortened(reflection->GetRepeatedString(*message, f, j)));
      } else if (reflection->HasField(*message, f)) {
        reflection->SetString(message, f, shortened(reflection->GetString(*message, f)));
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int j = 0; j < reflection->FieldSize(*message, f); ++j)
          shorten_strings(reflection->MutableRepeatedMessage(message, f, j));
      } else if (reflection->HasField(*message, f)) {
        shorten_strings(reflection->MutableMessage(message, f));
      }
    }
  }
}

// The saxpy of the liveness check: y = 2 x + y over n elements, x[i] = i and
// y[i] = 2 i, so every result (4 i) is exact in float.
constexpr uint32_t kSaxpyElements = 1000;

}  // namespace

Connection::Connection(const std::string& uri) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(8 << 20);
  // kad writes TCP addresses as tcp://HOST:PORT; gRPC takes HOST:PORT.
  const std::string target = uri.rfind("tcp://", 0) == 0 ? uri.substr(6) : uri;
  channel_ = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  stub_ = v1::Kad::NewStub(channel_);
}

std::unique_ptr<grpc::ClientContext> request_context(const std::optional<std::string>& session) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + kRequestDeadline);
  if (session) context->AddMetadata("kad-session", *session);
  return context;
}

DelayedCancel::DelayedCancel(grpc::ClientContext& context, std::chrono::microseconds delay)
    : thread_([this, &context, delay] {
        std::unique_lock<std::mutex> lock(mu_);
        if (!done_cv_.wait_for(lock, delay, [this] { return done_; })) context.TryCancel();
      }) {}

DelayedCancel::~DelayedCancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  done_cv_.notify_one();
  thread_.join();
}

WireSession::Opened WireSession::open(v1::Kad::Stub& stub, const std::string& client_name,
                                      std::chrono::seconds lifetime) {
  std::unique_ptr<WireSession> s(new WireSession());
  s->context_.set_deadline(std::chrono::system_clock::now() + lifetime);
  v1::OpenSessionRequest request;
  request.set_client_name(client_name);
  s->stream_ = stub.OpenSession(&s->context_, request);
  v1::SessionEvent first;
  if (!s->stream_->Read(&first)) return {nullptr, s->stream_->Finish()};
  s->id_ = first.session_id();
  s->open_ = true;
  return {std::move(s), grpc::Status::OK};
}

void WireSession::close() {
  if (!open_) return;
  open_ = false;
  context_.TryCancel();
  stream_->Finish().ok();  // CANCELLED: we ended it
}

WireSession::~WireSession() { close(); }

std::string check_fresh_session_runs_saxpy(const std::string& uri, std::string* module_digest) {
  Connection connection(uri);
  v1::Kad::Stub& stub = connection.stub();
  // kad reclaims closed sessions asynchronously: right after many closed, it
  // may still count them against its maximum for a moment.
  WireSession::Opened opened;
  for (const auto give_up = Clock::now() + std::chrono::seconds(5);;) {
    opened = WireSession::open(stub, "api-fuzz-liveness", std::chrono::seconds(60));
    if (opened.session || opened.status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED ||
        Clock::now() > give_up)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!opened.session) return "OpenSession: " + status_text(opened.status);
  const std::string id = opened.session->id();

  v1::CreateQueueResponse queue;
  grpc::Status s = stub.CreateQueue(request_context(id).get(), {}, &queue);
  if (!s.ok()) return "CreateQueue: " + status_text(s);
  v1::AllocateBufferRequest allocate;
  allocate.set_size(kSaxpyElements * sizeof(float));
  v1::AllocateBufferResponse x, y;
  s = stub.AllocateBuffer(request_context(id).get(), allocate, &x);
  if (s.ok()) s = stub.AllocateBuffer(request_context(id).get(), allocate, &y);
  if (!s.ok()) return "AllocateBuffer: " + status_text(s);

  std::vector<float> xs(kSaxpyElements), ys(kSaxpyElements);
  for (uint32_t i = 0; i < kSaxpyElements; ++i) {
    xs[i] = static_cast<float>(i);
    ys[i] = static_cast<float>(2 * i);
  }
  for (auto [buffer, values] : {std::pair{x.buffer(), &xs}, std::pair{y.buffer(), &ys}}) {
    auto context = request_context(id);
    v1::WriteBufferResponse written;
    auto writer = stub.WriteBuffer(context.get(), &written);
    v1::WriteBufferChunk chunk;
    chunk.set_queue(queue.queue());
    chunk.set_buffer(buffer);
    chunk.set_data(values->data(), values->size() * sizeof(float));
    writer->Write(chunk);
    writer->WritesDone();
    s = writer->Finish();
    if (!s.ok()) return "WriteBuffer: " + status_text(s);
  }

  v1::LoadModuleRequest load;
  load.set_format(v1::MODULE_FORMAT_OPENCL_C);
  load.set_code(saxpy_program().source);
  v1::LoadModuleResponse module;
  s = stub.LoadModule(request_context(id).get(), load, &module);
  if (!s.ok()) return "LoadModule: " + status_text(s);
  *module_digest = module.digest();
  v1::GetKernelRequest get;
  get.set_module(module.module());
  get.set_entry("saxpy");
  for (const Entry& e : saxpy_program().entries) {
    if (e.name != "saxpy") continue;
    for (const v1::ArgSpec& a : signature_of(e)) *get.add_args() = a;
  }
  v1::GetKernelResponse kernel;
  s = stub.GetKernel(request_context(id).get(), get, &kernel);
  if (!s.ok()) return "GetKernel: " + status_text(s);

  auto context = request_context(id);
  auto stream = stub.Submit(context.get());
  v1::QueueCommand launch;
  launch.set_queue(queue.queue());
  launch.set_tag(1);
  v1::Launch* l = launch.mutable_launch();
  l->set_kernel(kernel.kernel());
  l->mutable_ndrange()->add_extents(kSaxpyElements);
  l->add_args()->set_buffer(y.buffer());
  l->add_args()->set_buffer(x.buffer());
  const float a = 2.0f;
  uint32_t a_bits;
  std::memcpy(&a_bits, &a, sizeof(a));
  v1::KernelArg* scale = l->add_args();
  scale->set_scalar_bits(a_bits);
  scale->set_scalar(v1::SCALAR_TYPE_F32);
  v1::KernelArg* count = l->add_args();
  count->set_scalar_bits(kSaxpyElements);
  count->set_scalar(v1::SCALAR_TYPE_U32);
  v1::QueueCommand wait;
  wait.set_tag(2);
  wait.mutable_wait()->set_event(0);
  v1::QueueCommand read;
  read.set_tag(3);
  read.mutable_copy_out()->set_buffer(y.buffer());
  read.mutable_copy_out()->set_size(kSaxpyElements * sizeof(float));
  for (const v1::QueueCommand* c : {&launch, &wait, &read}) stream->Write(*c);
  stream->WritesDone();
  std::vector<v1::QueueReply> replies(3);
  for (v1::QueueReply& r : replies) {
    if (!stream->Read(&r))
      return "Submit: the stream ended early: " + status_text(stream->Finish());
    if (r.code() != 0) return "Submit: reply " + brief_text(r);
  }
  s = stream->Finish();
  if (!s.ok()) return "Submit: " + status_text(s);
  const std::string& data = replies[2].data();
  if (data.size() != kSaxpyElements * sizeof(float))
    return "copy_out returned " + std::to_string(data.size()) + " bytes";
  std::vector<float> got(kSaxpyElements);
  std::memcpy(got.data(), data.data(), data.size());
  for (uint32_t i = 0; i < kSaxpyElements; ++i) {
    if (got[i] != static_cast<float>(4 * i)) {
      return "saxpy element " + std::to_string(i) + " is " + std::to_string(got[i]) +
             ", expected " + std::to_string(4 * i);
    }
  }
  return "";
}

bool child_alive(pid_t pid, std::string* how_it_ended) {
  siginfo_t info;
  std::memset(&info, 0, sizeof(info));
  if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    *how_it_ended = std::string("waitid failed: ") + std::strerror(errno);
    return false;
  }
  if (info.si_pid == 0) return true;
  if (info.si_code == CLD_EXITED) {
    *how_it_ended = "exited with code " + std::to_string(info.si_status);
  } else {
    *how_it_ended = std::string("killed by signal ") + std::to_string(info.si_status) + " (" +
                    strsignal(info.si_status) + ")" + (info.si_code == CLD_DUMPED ? ", core" : "");
  }
  return false;
}

std::string brief_text(const google::protobuf::Message& message) {
  std::unique_ptr<google::protobuf::Message> copy(message.New());
  copy->CopyFrom(message);
  shorten_strings(copy.get());
  return copy->ShortDebugString();
}

}  // namespace kad::api_fuzz
