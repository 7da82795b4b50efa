// Bearer tokens for clients over TCP (DESIGN §8): `--tokens FILE` maps each
// token to a tenant. Once tokens are configured, every kad.v1 call that
// comes over TCP must carry `authorization: Bearer TOKEN`, or it is
// UNAUTHENTICATED and reaches nothing (not even ListDevices or GetStatus).
// UNIX-socket peers are named by their uid instead, and the in-process
// channel is the program itself.
//
// The file: one `TOKEN TENANT` per line; blank lines and `#` comments are
// skipped. Tokens are kept only as SHA-256 digests and compared against
// every entry in constant time; the file is read again on SIGHUP.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace kad::server {

class BearerTokens {
 public:
  // Reads `path`. INVALID_ARGUMENT naming the line for a malformed one; a
  // token shorter than 16 characters is refused (guessable).
  static absl::StatusOr<BearerTokens> load(const std::string& path);

  // The tenant of `token`, or none. Takes the same time whichever entry (if
  // any) matches.
  std::optional<std::string> tenant_of(absl::string_view token) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::array<unsigned char, 32> digest;
    std::string tenant;
  };
  std::vector<Entry> entries_;
};

// What the service asks before it serves a call: the tokens now in force,
// replaced as a whole by reload().
class Authenticator {
 public:
  // No file: authentication is off (every caller is served).
  static absl::StatusOr<std::unique_ptr<Authenticator>> create(const std::string& tokens_file);

  bool enabled() const { return !file_.empty(); }
  // Reads the file again; on an error the tokens in force stay.
  absl::Status reload();

  // The tenant the call's token names ("" where none is asked for), or
  // UNAUTHENTICATED saying why, for a call from `peer` (gRPC's peer string:
  // "ipv4:…", "ipv6:…", "unix:…") carrying `authorization` (the metadata's
  // value; none when absent).
  absl::StatusOr<std::string> check(absl::string_view peer,
                                    std::optional<absl::string_view> authorization) const;

 private:
  std::string file_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const BearerTokens> tokens_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kad::server
