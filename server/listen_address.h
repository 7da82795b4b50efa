// A listen URI of kad's (unix:PATH, tcp://HOST:PORT), checked.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace kad::server {

// One listening address, checked: the gRPC address to bind and whether it is
// a TCP address on loopback.
struct ListenAddress {
  std::string uri;      // as given
  std::string address;  // as gRPC wants it
  bool tcp = false;
  bool loopback = false;
};
absl::StatusOr<ListenAddress> parse_listen_uri(const std::string& uri);

}  // namespace kad::server
