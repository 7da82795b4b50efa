#include "server/metrics_server.h"

#include <httplib.h>

#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/listen_address.h"

namespace kad::server {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::start(
    const std::string& uri, std::function<std::string()> render) {
  absl::StatusOr<ListenAddress> address = parse_listen_uri(uri);
  if (!address.ok() || !address->tcp) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--metrics `%s` is not tcp://HOST:PORT", uri));
  }
  const size_t colon = address->address.rfind(':');
  std::string host = address->address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int port = 0;
  if (!absl::SimpleAtoi(address->address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--metrics `%s`: the port is not a number within 0..65535", uri));
  }
  std::unique_ptr<MetricsServer> m(new MetricsServer());
  m->server_ = std::make_unique<httplib::Server>();
  httplib::Server& s = *m->server_;
  // A scrape is small and rare: two threads, short timeouts, no bodies.
  s.new_task_queue = [] { return new httplib::ThreadPool(2); };
  s.set_read_timeout(5, 0);
  s.set_write_timeout(5, 0);
  s.set_keep_alive_timeout(5);
  s.set_payload_max_length(0);
  s.Get("/metrics", [render = std::move(render)](const httplib::Request&, httplib::Response& r) {
    r.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  const int bound = port == 0 ? s.bind_to_any_port(host) : (s.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    return absl::UnavailableError(
        absl::StrFormat("--metrics `%s`: cannot listen there (in use, or not this host's)", uri));
  }
  const bool v6 = host.find(':') != std::string::npos;
  m->url_ = absl::StrCat("http://", v6 ? "[" : "", host, v6 ? "]" : "", ":", bound, "/metrics");
  m->thread_ = std::thread([&s] { s.listen_after_bind(); });
  // Serving before start returns, so that a stop cannot come first.
  for (int i = 0; i < 5000 && !s.is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!s.is_running())
    return absl::UnavailableError(absl::StrFormat("--metrics `%s`: cannot serve", uri));
  return m;
}

MetricsServer::~MetricsServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace kad::server
