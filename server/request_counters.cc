#include "server/request_counters.h"

#include <google/protobuf/descriptor.h>

#include <cstring>

namespace kad::server {
namespace {

class CountingInterceptor final : public grpc::experimental::Interceptor {
 public:
  CountingInterceptor(RequestCounters& counters, int method)
      : counters_(counters), method_(method) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      counters_.count_request(method_, methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  RequestCounters& counters_;
  int method_;
};

class CountingInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CountingInterceptorFactory(RequestCounters& counters) : counters_(counters) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new CountingInterceptor(counters_, counters_.method_index(info->method()));
  }

 private:
  RequestCounters& counters_;
};

}  // namespace

RequestCounters::RequestCounters() {
  // The services kad serves, as their descriptors list them.
  for (const char* service : {"kad.v1.Kad", "grpc.health.v1.Health"}) {
    const google::protobuf::ServiceDescriptor* d =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
    if (d == nullptr) {
      // The health service's descriptor is gRPC's own, not always linked in.
      if (std::strcmp(service, "grpc.health.v1.Health") == 0) {
        methods_.push_back("grpc.health.v1.Health/Check");
        methods_.push_back("grpc.health.v1.Health/Watch");
      }
      continue;
    }
    for (int i = 0; i < d->method_count(); ++i)
      methods_.push_back(d->full_name() + "/" + d->method(i)->name());
  }
  methods_.push_back("unknown");
  requests_ = std::make_unique<std::atomic<uint64_t>[]>(methods_.size() * kCodes);
  for (size_t i = 0; i < methods_.size() * kCodes; ++i) requests_[i].store(0);
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
RequestCounters::interceptor_factory() {
  return std::make_unique<CountingInterceptorFactory>(*this);
}

int RequestCounters::method_index(const char* full_name) const {
  const int unknown = static_cast<int>(methods_.size()) - 1;
  if (full_name == nullptr || full_name[0] != '/') return unknown;
  for (int i = 0; i < unknown; ++i) {
    if (methods_[i] == full_name + 1) return i;
  }
  return unknown;
}

void RequestCounters::count_request(int method, int code) {
  if (code < 0 || code >= kCodes) code = static_cast<int>(absl::StatusCode::kUnknown);
  requests_[method * kCodes + code].fetch_add(1, std::memory_order_relaxed);
}

void RequestCounters::count_command(absl::StatusCode code) {
  int c = static_cast<int>(code);
  if (c < 0 || c >= kCodes) c = static_cast<int>(absl::StatusCode::kUnknown);
  commands_[c].fetch_add(1, std::memory_order_relaxed);
}

}  // namespace kad::server
