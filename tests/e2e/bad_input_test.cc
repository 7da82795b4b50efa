// Every kad.v1 request type with bad input, at the wire level: each gets a
// clear error naming the problem, and the daemon goes on serving a bystander
// client (checked after every test).
#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "kad/v1/kad.grpc.pb.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/wire_session.h"

namespace kad {
namespace {

using client::Arg;
using client::ArgSpec;
using testing::bytes_of;
using ::testing::HasSubstr;
using testing::WireSession;

class BadInput : public testing::DaemonSuite {
 protected:
  void SetUp() override {
    session_ = std::make_unique<WireSession>(daemon().unix_uri(), "bad-input");
    stub_ = &session_->stub();
    queue_ = unary(&v1::Kad::Stub::CreateQueue, v1::CreateQueueRequest()).queue();
    v1::AllocateBufferRequest alloc;
    alloc.set_size(64);
    buffer_ = unary(&v1::Kad::Stub::AllocateBuffer, alloc).buffer();
    v1::LoadModuleRequest load;
    load.set_format(v1::MODULE_FORMAT_OPENCL_C);
    load.set_code(
        "kernel void fill(KAD_CONTEXT, global int* out, int v) {\n"
        "  if (kad_active()) out[kad_global_linear()] = v;\n}\n");
    module_ = unary(&v1::Kad::Stub::LoadModule, load).module();
    v1::GetKernelRequest get;
    get.set_module(module_);
    get.set_entry("fill");
    get.add_args()->set_kind(v1::ARG_KIND_BUFFER);
    v1::ArgSpec* v = get.add_args();
    v->set_kind(v1::ARG_KIND_SCALAR);
    v->set_scalar(v1::SCALAR_TYPE_I32);
    kernel_ = unary(&v1::Kad::Stub::GetKernel, get).kernel();
    ASSERT_NE(kernel_, 0u);
  }

  // A WriteBuffer stream of `chunks`: its status.
  grpc::Status write_chunks(const std::vector<v1::WriteBufferChunk>& chunks) {
    grpc::ClientContext context;
    attach(context);
    v1::WriteBufferResponse response;
    auto writer = stub_->WriteBuffer(&context, &response);
    for (const auto& c : chunks) writer->Write(c);
    writer->WritesDone();
    return writer->Finish();
  }

  // A stream of kad.v1.Kad's `method` whose messages are `messages`' bytes
  // as they are, through gRPC's generic stub: its status.
  grpc::Status stream_bytes(const char* method, const std::vector<std::string>& messages) {
    grpc::GenericStub generic(session_->channel());
    grpc::CompletionQueue cq;
    grpc::ClientContext context;
    attach(context);
    auto call = generic.PrepareCall(&context, absl::StrCat("/kad.v1.Kad/", method), &cq);
    const auto step = [&cq] {
      void* tag;
      bool ok = false;
      return cq.Next(&tag, &ok) && ok;
    };
    call->StartCall(nullptr);
    bool open = step();
    for (const std::string& m : messages) {
      if (!open) break;
      grpc::Slice slice(m);
      call->Write(grpc::ByteBuffer(&slice, 1), nullptr);
      open = step();
    }
    if (open) {
      call->WritesDone(nullptr);
      step();
    }
    grpc::ByteBuffer response;
    for (bool more = true; more;) {
      call->Read(&response, nullptr);
      more = step();
    }
    grpc::Status status;
    call->Finish(&status, nullptr);
    step();
    call.reset();
    cq.Shutdown();
    void* tag;
    bool ok;
    while (cq.Next(&tag, &ok)) {
    }
    return status;
  }

  // The daemon still serves everyone else: a bystander's verified launch.
  void TearDown() override {
    session_->close();
    testing::expect_bystander_served(daemon().tcp_uri());
  }

  void attach(grpc::ClientContext& c) { session_->prepare(c); }

  template <typename Request, typename Response>
  Response unary(grpc::Status (v1::Kad::Stub::*call)(grpc::ClientContext*, const Request&,
                                                     Response*),
                 const Request& request, grpc::Status* status = nullptr) {
    grpc::ClientContext context;
    attach(context);
    Response response;
    grpc::Status s = (stub_->*call)(&context, request, &response);
    if (status)
      *status = s;
    else
      EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }
  template <typename Request, typename Response>
  grpc::Status fails(grpc::Status (v1::Kad::Stub::*call)(grpc::ClientContext*, const Request&,
                                                         Response*),
                     const Request& request) {
    grpc::Status s;
    unary(call, request, &s);
    return s;
  }

  // One Submit stream of this session; each command gets one reply.
  struct Stream : WireSession::Stream {
    explicit Stream(BadInput& t) : WireSession::Stream(*t.session_) {}
  };

  v1::QueueCommand launch_command(int64_t extent = 16) {
    v1::QueueCommand c;
    c.set_queue(queue_);
    v1::Launch* l = c.mutable_launch();
    l->set_kernel(kernel_);
    l->mutable_ndrange()->add_extents(extent);
    l->add_args()->set_buffer(buffer_);
    v1::KernelArg* v = l->add_args();
    v->set_scalar_bits(5);
    v->set_scalar(v1::SCALAR_TYPE_I32);
    return c;
  }

  std::unique_ptr<WireSession> session_;
  v1::Kad::Stub* stub_ = nullptr;
  uint64_t queue_ = 0, buffer_ = 0, module_ = 0, kernel_ = 0;
};

#define EXPECT_ERROR(status, code_, text)                \
  do {                                                   \
    const grpc::Status s_ = (status);                    \
    EXPECT_EQ(s_.error_code(), grpc::StatusCode::code_); \
    EXPECT_THAT(s_.error_message(), HasSubstr(text));    \
  } while (0)

#define EXPECT_REPLY_ERROR(reply, code_, text)                       \
  do {                                                               \
    const v1::QueueReply r_ = (reply);                               \
    EXPECT_EQ(r_.code(), static_cast<int>(grpc::StatusCode::code_)); \
    EXPECT_THAT(r_.message(), HasSubstr(text));                      \
  } while (0)

TEST_F(BadInput, ACallWithoutASessionIsRefused) {
  grpc::ClientContext context;
  v1::AllocateBufferRequest r;
  r.set_size(8);
  v1::AllocateBufferResponse response;
  EXPECT_ERROR(stub_->AllocateBuffer(&context, r, &response), FAILED_PRECONDITION, "no session");
}

TEST_F(BadInput, AnUnknownSessionIdIsNotFound) {
  grpc::ClientContext context;
  context.AddMetadata("kad-session", "0123456789abcdef0123456789abcdef");
  v1::CreateQueueResponse response;
  EXPECT_ERROR(stub_->CreateQueue(&context, {}, &response), NOT_FOUND,
               "no open session has id `0123456789abcdef0123456789abcdef`");
}

TEST_F(BadInput, AllocateBufferChecksSizeAndDevice) {
  v1::AllocateBufferRequest r;
  r.set_size(0);
  EXPECT_ERROR(fails(&v1::Kad::Stub::AllocateBuffer, r), INVALID_ARGUMENT, "0 bytes");
  r.set_size(uint64_t{1} << 62);
  EXPECT_ERROR(fails(&v1::Kad::Stub::AllocateBuffer, r), RESOURCE_EXHAUSTED, "4611686018427387904");
  r.set_size(8);
  r.set_device_id("cuda:9");
  EXPECT_ERROR(fails(&v1::Kad::Stub::AllocateBuffer, r), NOT_FOUND, "no device has id `cuda:9`");
}

TEST_F(BadInput, FreeBufferOfAnUnknownHandleIsNotFound) {
  v1::FreeBufferRequest r;
  r.set_buffer(987654);
  EXPECT_ERROR(fails(&v1::Kad::Stub::FreeBuffer, r), NOT_FOUND, "no buffer 987654");
  r.set_buffer(buffer_);
  EXPECT_TRUE(fails(&v1::Kad::Stub::FreeBuffer, r).ok());
  EXPECT_ERROR(fails(&v1::Kad::Stub::FreeBuffer, r), NOT_FOUND, "no buffer");  // twice
}

TEST_F(BadInput, WriteBufferChecksHandlesRangeAndChunkSize) {
  EXPECT_ERROR(write_chunks({}), INVALID_ARGUMENT, "no chunk");
  v1::WriteBufferChunk c;
  c.set_queue(queue_);
  c.set_buffer(buffer_);
  c.set_offset(60);
  c.set_data(std::string(8, 'x'));
  EXPECT_ERROR(write_chunks({c}), OUT_OF_RANGE,
               "range of 8 bytes at offset 60 does not fit in a buffer of 64 bytes");
  c.set_offset(0);
  c.set_buffer(4242);
  EXPECT_ERROR(write_chunks({c}), NOT_FOUND, "no buffer 4242");
  c.set_buffer(buffer_);
  c.set_queue(4343);
  EXPECT_ERROR(write_chunks({c}), NOT_FOUND, "no queue 4343");
  c.set_queue(queue_);
  c.set_data(std::string((1 << 20) + 1, 'x'));
  EXPECT_ERROR(write_chunks({c}), INVALID_ARGUMENT, "exceeds the maximum of 1048576");
}

// A write that gives its whole size is checked whole before a byte lands,
// and must send exactly that many bytes.
TEST_F(BadInput, WriteBufferChecksTheAnnouncedSizeBeforeWritingAndHoldsTheStreamToIt) {
  v1::WriteBufferChunk first;
  first.set_queue(queue_);
  first.set_buffer(buffer_);
  first.set_offset(0);
  first.set_size(65);  // the buffer holds 64
  first.set_data(std::string(8, 'y'));
  EXPECT_ERROR(write_chunks({first}), OUT_OF_RANGE,
               "range of 65 bytes at offset 0 does not fit in a buffer of 64 bytes");
  first.set_offset(UINT64_MAX - 2);
  first.set_size(8);
  EXPECT_ERROR(write_chunks({first}), OUT_OF_RANGE, "does not fit");
  first.set_offset(0);
  first.set_buffer(5151);
  EXPECT_ERROR(write_chunks({first}), NOT_FOUND, "no buffer 5151");
  first.set_buffer(buffer_);
  first.set_size(16);
  v1::WriteBufferChunk more;
  more.set_data(std::string(9, 'y'));
  EXPECT_ERROR(write_chunks({first, more}), INVALID_ARGUMENT, "announced 16 bytes and sent more");
  EXPECT_ERROR(write_chunks({first}), INVALID_ARGUMENT, "announced 16 bytes and sent 8");
  more.set_data(std::string(8, 'y'));
  EXPECT_TRUE(write_chunks({first, more}).ok());
}

// Bytes that are no WriteBufferChunk are refused, naming what is wrong; a
// chunk in any valid encoding is taken as protobuf would take it.
TEST_F(BadInput, WriteBufferRefusesBytesThatAreNoChunkAndTakesAnyValidEncoding) {
  EXPECT_ERROR(stream_bytes("WriteBuffer", {std::string("\x22\x64", 2) + "short"}),
               INVALID_ARGUMENT,
               "a WriteBuffer chunk that does not parse: its data says 100 bytes and fewer follow");
  EXPECT_ERROR(stream_bytes("WriteBuffer", {std::string("\x0f", 1)}), INVALID_ARGUMENT,
               "does not parse: field 1 of wire type 7");
  // The data before the fields, an unknown field, and a second data field,
  // which is the one protobuf takes.
  v1::WriteBufferChunk c;
  c.set_queue(queue_);
  c.set_buffer(buffer_);
  c.set_offset(4);
  c.set_data("lost");
  google::protobuf::UnknownFieldSet* more = c.GetReflection()->MutableUnknownFields(&c);
  more->AddVarint(77, 1);
  more->AddLengthDelimited(v1::WriteBufferChunk::kDataFieldNumber, "land");
  v1::WriteBufferChunk data_first;
  data_first.set_data(c.data());
  std::string bytes = data_first.SerializeAsString();
  c.clear_data();
  bytes += c.SerializeAsString();
  ASSERT_TRUE(stream_bytes("WriteBuffer", {bytes}).ok());
  v1::ReadBufferRequest r;
  r.set_queue(queue_);
  r.set_buffer(buffer_);
  r.set_size(12);
  grpc::ClientContext context;
  attach(context);
  auto reader = stub_->ReadBuffer(&context, r);
  std::string back;
  for (v1::BufferChunk chunk; reader->Read(&chunk);) back += chunk.data();
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(back, std::string(4, '\0') + "land" + std::string(4, '\0'));
}

TEST_F(BadInput, ReadBufferChecksHandlesAndRange) {
  v1::ReadBufferRequest r;
  r.set_queue(queue_);
  r.set_buffer(buffer_);
  r.set_offset(1);
  r.set_size(64);
  auto read = [&] {
    grpc::ClientContext context;
    attach(context);
    auto reader = stub_->ReadBuffer(&context, r);
    v1::BufferChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  };
  EXPECT_ERROR(read(), OUT_OF_RANGE,
               "range of 64 bytes at offset 1 does not fit in a buffer of 64 bytes");
  r.set_offset(UINT64_MAX);
  EXPECT_ERROR(read(), OUT_OF_RANGE, "does not fit");
  r.set_offset(0);
  r.set_buffer(31337);
  EXPECT_ERROR(read(), NOT_FOUND, "no buffer 31337");
  EXPECT_ERROR(stream_bytes("ReadBuffer", {}), INVALID_ARGUMENT, "ReadBuffer received no request");
  EXPECT_ERROR(stream_bytes("ReadBuffer", {std::string("\x0a\x05", 2)}), INVALID_ARGUMENT,
               "ReadBuffer's request of 2 bytes does not parse");
}

TEST_F(BadInput, LoadModuleChecksFormatCodeAndSize) {
  v1::LoadModuleRequest r;
  r.set_code("kernel void k(KAD_CONTEXT) {}");
  EXPECT_ERROR(fails(&v1::Kad::Stub::LoadModule, r), INVALID_ARGUMENT, "not a kad.v1.ModuleFormat");
  r.set_format(v1::MODULE_FORMAT_SPIRV);  // OpenCL C text is not a SPIR-V module
  EXPECT_ERROR(fails(&v1::Kad::Stub::LoadModule, r), INVALID_ARGUMENT, "SPIR-V module");
  r.set_format(v1::MODULE_FORMAT_LLVM_BC_SPIR64);
  EXPECT_ERROR(fails(&v1::Kad::Stub::LoadModule, r), INVALID_ARGUMENT, "no bitcode magic");
  r.set_format(v1::MODULE_FORMAT_OPENCL_C);
  r.set_code("");
  EXPECT_ERROR(fails(&v1::Kad::Stub::LoadModule, r), INVALID_ARGUMENT, "empty");
  r.set_code(std::string(6 << 20, ' '));  // over the daemon's message limit
  EXPECT_EQ(fails(&v1::Kad::Stub::LoadModule, r).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(BadInput, GetKernelChecksModuleEntryArgumentsAndSizes) {
  v1::GetKernelRequest r;
  r.set_module(5555);
  r.set_entry("fill");
  EXPECT_ERROR(fails(&v1::Kad::Stub::GetKernel, r), NOT_FOUND, "no module 5555");
  r.set_module(module_);
  r.set_entry("fill; rm -rf");
  EXPECT_ERROR(fails(&v1::Kad::Stub::GetKernel, r), INVALID_ARGUMENT, "not a valid identifier");
  r.set_entry("fill");
  r.add_args();  // no kind
  EXPECT_ERROR(fails(&v1::Kad::Stub::GetKernel, r), INVALID_ARGUMENT, "argument 0 has no kind");
  r.clear_args();
  for (int d = 0; d < 9; ++d) r.mutable_static_ndrange()->add_extents(2);
  EXPECT_ERROR(fails(&v1::Kad::Stub::GetKernel, r), INVALID_ARGUMENT,
               "ndrange has 9 dimensions, more than the maximum of 8");
  r.clear_static_ndrange();
  r.mutable_static_workgroup()->add_sizes(-4);
  EXPECT_ERROR(fails(&v1::Kad::Stub::GetKernel, r), INVALID_ARGUMENT, "negative");
}

TEST_F(BadInput, CreateQueueOnAnUnknownDeviceIsNotFound) {
  v1::CreateQueueRequest r;
  r.set_device_id("opencl:nvidia:7");
  EXPECT_ERROR(fails(&v1::Kad::Stub::CreateQueue, r), NOT_FOUND, "opencl:nvidia:7");
}

TEST_F(BadInput, SubmitRejectsEachBadCommandAndKeepsTheStream) {
  Stream stream(*this);
  v1::QueueCommand c = launch_command();
  c.mutable_launch()->set_kernel(999);
  EXPECT_REPLY_ERROR(stream.send(c), NOT_FOUND, "no kernel 999");

  c = launch_command();
  c.mutable_launch()->mutable_args()->RemoveLast();
  EXPECT_REPLY_ERROR(stream.send(c), INVALID_ARGUMENT,
                     "kernel `fill` takes 2 arguments, the launch gave 1");

  c = launch_command();
  c.mutable_launch()->mutable_args(0)->set_scalar_bits(1);
  c.mutable_launch()->mutable_args(0)->set_scalar(v1::SCALAR_TYPE_I32);
  EXPECT_REPLY_ERROR(stream.send(c), INVALID_ARGUMENT, "argument 0 must be a buffer");

  c = launch_command();
  c.mutable_launch()->mutable_args(1)->set_scalar(v1::SCALAR_TYPE_F64);
  EXPECT_REPLY_ERROR(stream.send(c), INVALID_ARGUMENT,
                     "argument 1 must be a int, the launch gave a double");

  c = launch_command();
  c.mutable_launch()->mutable_args(0)->set_buffer(123456);
  EXPECT_REPLY_ERROR(stream.send(c), NOT_FOUND, "names buffer 123456");

  c = launch_command();
  c.mutable_launch()->mutable_args(0)->Clear();
  EXPECT_REPLY_ERROR(stream.send(c), INVALID_ARGUMENT, "argument 0 has no value");

  c = launch_command();
  c.mutable_launch()->mutable_ndrange()->set_extents(0, -3);
  EXPECT_REPLY_ERROR(stream.send(c), INVALID_ARGUMENT, "negative extent -3");

  c = launch_command();
  for (int d = 0; d < 8; ++d) c.mutable_launch()->mutable_ndrange()->add_extents(1);
  EXPECT_REPLY_ERROR(stream.send(c), INVALID_ARGUMENT, "ndrange has 9 dimensions");

  c = launch_command();
  c.mutable_launch()->mutable_ndrange()->add_offsets(1);
  c.mutable_launch()->mutable_ndrange()->add_offsets(2);
  EXPECT_REPLY_ERROR(stream.send(c), INVALID_ARGUMENT, "1 extents but 2 offsets");

  c = launch_command(int64_t{1} << 40);
  c.mutable_launch()->mutable_ndrange()->add_extents(int64_t{1} << 40);
  EXPECT_REPLY_ERROR(stream.send(c), INVALID_ARGUMENT, "more than 2^63-1 work-items");

  c = launch_command();
  c.mutable_launch()->mutable_workgroup()->add_sizes(1 << 20);
  EXPECT_REPLY_ERROR(stream.send(c), INVALID_ARGUMENT,
                     "workgroup size (1048576) has 1048576 work-items, more than");

  v1::QueueCommand w;
  w.mutable_wait()->set_event(424242);
  EXPECT_REPLY_ERROR(stream.send(w), NOT_FOUND, "event 424242 was never issued");

  v1::QueueCommand in;
  in.mutable_copy_in()->set_buffer(buffer_);
  in.mutable_copy_in()->set_offset(63);
  in.mutable_copy_in()->set_data("ab");
  EXPECT_REPLY_ERROR(stream.send(in), OUT_OF_RANGE, "range of 2 bytes at offset 63");
  in.mutable_copy_in()->set_offset(0);
  in.mutable_copy_in()->set_data(std::string((1 << 20) + 1, 'x'));
  EXPECT_REPLY_ERROR(stream.send(in), INVALID_ARGUMENT, "use WriteBuffer");

  v1::QueueCommand out;
  out.mutable_copy_out()->set_buffer(buffer_);
  out.mutable_copy_out()->set_size((1 << 20) + 1);
  EXPECT_REPLY_ERROR(stream.send(out), INVALID_ARGUMENT, "use ReadBuffer");

  EXPECT_REPLY_ERROR(stream.send(v1::QueueCommand()), INVALID_ARGUMENT,
                     "has no launch, run, batch, wait, copy_in, copy_out or ping");

  c = launch_command();
  c.set_queue(queue_ + 1000);
  EXPECT_REPLY_ERROR(stream.send(c), INVALID_ARGUMENT, "bound to queue");

  // The same stream still launches.
  v1::QueueReply ok = stream.send(launch_command());
  EXPECT_EQ(ok.code(), 0) << ok.message();
  EXPECT_NE(ok.event(), 0u);
}

TEST_F(BadInput, ARunIsCheckedAsALaunchIs) {
  Stream stream(*this);
  v1::QueueCommand c;
  c.set_queue(queue_);
  *c.mutable_run() = launch_command().launch();
  c.mutable_run()->set_kernel(999);
  EXPECT_REPLY_ERROR(stream.send(c), NOT_FOUND, "no kernel 999");
  c.mutable_run()->set_kernel(kernel_);
  c.mutable_run()->mutable_ndrange()->set_extents(0, -3);
  EXPECT_REPLY_ERROR(stream.send(c), INVALID_ARGUMENT, "negative extent -3");
  for (int i = 0; i < 100; ++i) c.mutable_run()->add_args()->set_buffer(buffer_);
  EXPECT_REPLY_ERROR(stream.send(c), INVALID_ARGUMENT, "a launch has 102 arguments");

  // A good run answers once its launch is done, with the launch's event.
  *c.mutable_run() = launch_command().launch();
  v1::QueueReply ran = stream.send(c);
  EXPECT_EQ(ran.code(), 0) << ran.message();
  EXPECT_NE(ran.event(), 0u);
  EXPECT_EQ(ran.workgroup_size(), 1);
}

TEST_F(BadInput, ABatchNamesItsFirstFailedLaunchAndRunsTheRest) {
  Stream stream(*this);
  v1::QueueCommand c;
  c.set_queue(queue_);
  v1::LaunchBatch* batch = c.mutable_batch();
  for (int i = 0; i < 6; ++i) *batch->add_launches() = launch_command().launch();
  batch->mutable_launches(2)->set_kernel(999);
  batch->mutable_launches(4)->mutable_ndrange()->set_extents(0, -3);
  const v1::QueueReply r = stream.send(c);
  EXPECT_EQ(r.code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_THAT(r.message(), HasSubstr("launch 2 of a batch of 6: "));
  EXPECT_THAT(r.message(), HasSubstr("no kernel 999"));
  EXPECT_EQ(r.failed_index(), 2u);
  // The good ones ran: launches 0, 1, 3 and 5 are events 1 to 4.
  EXPECT_EQ(r.event(), 4u);
  v1::QueueCommand w;
  w.mutable_wait()->set_event(4);
  EXPECT_EQ(stream.send(w).code(), 0);

  // Too many launches in one batch: refused whole, before any runs.
  for (int i = 0; i < 1024 - 6 + 1; ++i) *batch->add_launches() = launch_command().launch();
  EXPECT_REPLY_ERROR(stream.send(c), INVALID_ARGUMENT,
                     "a batch of 1025 launches exceeds the maximum of 1024; none was run");
  // An empty batch is answered, with nothing run; the stream still launches.
  c.mutable_batch()->clear_launches();
  EXPECT_EQ(stream.send(c).code(), 0);
  v1::QueueReply ok = stream.send(launch_command());
  EXPECT_EQ(ok.code(), 0) << ok.message();
  EXPECT_EQ(ok.event(), 5u);
}

TEST_F(BadInput, SubmitOnAnUnknownQueueIsNotFound) {
  Stream stream(*this);
  v1::QueueCommand c = launch_command();
  c.set_queue(777777);
  EXPECT_REPLY_ERROR(stream.send(c), NOT_FOUND, "no queue 777777");
}

TEST_F(BadInput, AnOversizedStreamMessageIsRefusedByTheTransport) {
  Stream stream(*this);
  grpc::ClientContext context;
  attach(context);
  auto rw = stub_->Submit(&context);
  v1::QueueCommand c;
  c.set_queue(queue_);
  c.mutable_copy_in()->set_buffer(buffer_);
  c.mutable_copy_in()->set_data(std::string(6 << 20, 'x'));
  rw->Write(c);
  v1::QueueReply reply;
  EXPECT_FALSE(rw->Read(&reply));
  EXPECT_EQ(rw->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

}  // namespace
}  // namespace kad
