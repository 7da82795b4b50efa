// kad under a service manager (systemd, DESIGN §10): the readiness protocol
// of sd_notify(3), spoken directly — one datagram per change of state to the
// UNIX socket $NOTIFY_SOCKET names — so that `Type=notify` units start their
// dependents once kad serves and see it drain.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kad::server {

class ServiceManagerNotifier {
 public:
  // Reads $NOTIFY_SOCKET and removes it from the environment, so that no
  // process kad starts (workers, compilers) can speak for kad. Unset: a
  // notifier that sends nothing. An address kad cannot use (not a path, not
  // `@abstract`, too long) is INVALID_ARGUMENT naming it.
  static absl::StatusOr<ServiceManagerNotifier> from_environment();
  ServiceManagerNotifier() = default;

  bool enabled() const { return !address_.empty(); }
  // Sends `state` ("READY=1\nSTATUS=...", "STOPPING=1"); OK and nothing
  // sent when not enabled.
  absl::Status notify(std::string_view state) const;

 private:
  explicit ServiceManagerNotifier(std::string address) : address_(std::move(address)) {}
  std::string address_;  // a path, or @name for the abstract namespace; "": none
};

}  // namespace kad::server
