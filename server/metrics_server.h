// `--metrics tcp://HOST:PORT`: Prometheus scrapes GET /metrics there over
// plain HTTP (cpp-httplib, two threads of its own). The page is what
// `render` returns at each scrape. It tells counts and the operator's
// tenant names, no client data; bind it to loopback or to the network the
// scraper is on.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace kad::server {

class MetricsServer {
 public:
  // INVALID_ARGUMENT for a URI that is not tcp://HOST:PORT (port 0: a free
  // one), UNAVAILABLE when it cannot listen there.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> start(const std::string& uri,
                                                              std::function<std::string()> render);
  ~MetricsServer();  // stops serving

  // Where it serves: http://HOST:PORT/metrics, the port resolved.
  const std::string& url() const { return url_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string url_;
};

}  // namespace kad::server
