#include "server/bearer_tokens.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kad::server {
namespace {

constexpr size_t kShortestToken = 16;

std::array<unsigned char, 32> digest_of(absl::string_view token) {
  std::array<unsigned char, 32> out;
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), out.data());
  return out;
}

}  // namespace

absl::StatusOr<BearerTokens> BearerTokens::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrFormat("--tokens: cannot read %s", path));
  }
  BearerTokens tokens;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--tokens %s, line %d: expected `TOKEN TENANT`, found %d fields", path,
                          number, fields.size()));
    }
    if (fields[0].size() < kShortestToken) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--tokens %s, line %d: a token of %d characters is too easy to guess "
                          "(at least %d)",
                          path, number, fields[0].size(), kShortestToken));
    }
    tokens.entries_.push_back({digest_of(fields[0]), std::string(fields[1])});
  }
  return tokens;
}

std::optional<std::string> BearerTokens::tenant_of(absl::string_view token) const {
  // Every entry is compared, with CRYPTO_memcmp, on digests of one length:
  // the time says nothing about which entry matched or how much of it.
  const std::array<unsigned char, 32> digest = digest_of(token);
  const Entry* found = nullptr;
  for (const Entry& e : entries_) {
    const bool same = CRYPTO_memcmp(e.digest.data(), digest.data(), digest.size()) == 0;
    found = same ? &e : found;
  }
  if (found == nullptr) return std::nullopt;
  return found->tenant;
}

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::create(
    const std::string& tokens_file) {
  auto a = std::make_unique<Authenticator>();
  a->file_ = tokens_file;
  if (a->enabled()) {
    if (absl::Status s = a->reload(); !s.ok()) return s;
  }
  return a;
}

absl::Status Authenticator::reload() {
  absl::StatusOr<BearerTokens> tokens = BearerTokens::load(file_);
  if (!tokens.ok()) return tokens.status();
  auto shared = std::make_shared<const BearerTokens>(*std::move(tokens));
  absl::MutexLock lock(&mu_);
  tokens_ = std::move(shared);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Authenticator::check(
    absl::string_view peer, std::optional<absl::string_view> authorization) const {
  if (!enabled()) return std::string();
  // Only TCP peers present tokens; a UNIX socket's peer is its uid.
  if (!absl::StartsWith(peer, "ipv4:") && !absl::StartsWith(peer, "ipv6:")) return std::string();
  if (!authorization) {
    return absl::UnauthenticatedError(
        "kad requires a bearer token on TCP: send metadata `authorization: Bearer TOKEN` (the "
        "client library: ConnectOptions::token, KAD_TOKEN or KAD_TOKEN_FILE; kactl --token)");
  }
  absl::string_view value = *authorization;
  if (!absl::ConsumePrefix(&value, "Bearer ")) {
    return absl::UnauthenticatedError(
        "the `authorization` metadata must be `Bearer TOKEN`; kad takes no other scheme");
  }
  std::shared_ptr<const BearerTokens> tokens;
  {
    absl::MutexLock lock(&mu_);
    tokens = tokens_;
  }
  std::optional<std::string> tenant = tokens->tenant_of(value);
  if (!tenant) return absl::UnauthenticatedError("the bearer token is not one kad accepts");
  return *std::move(tenant);
}

}  // namespace kad::server
