#include "server/listen_address.h"

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"

namespace kad::server {

absl::StatusOr<ListenAddress> parse_listen_uri(const std::string& uri) {
  ListenAddress out;
  out.uri = uri;
  if (absl::StartsWith(uri, "unix:")) {
    const std::string path = uri.substr(5);
    if (path.empty()) return absl::InvalidArgumentError("listen URI `unix:` has no path");
    out.address = uri;
    return out;
  }
  if (absl::StartsWith(uri, "tcp://")) {
    const std::string hostport = uri.substr(6);
    const size_t colon = hostport.rfind(':');
    if (colon == std::string::npos || colon + 1 == hostport.size()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("listen URI `%s` needs a port: tcp://HOST:PORT", uri));
    }
    const std::string host = hostport.substr(0, colon);
    out.address = hostport;
    out.tcp = true;
    out.loopback = host == "localhost" || absl::StartsWith(host, "127.") || host == "[::1]";
    return out;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("listen URI `%s` is neither unix:PATH nor tcp://HOST:PORT", uri));
}

}  // namespace kad::server
