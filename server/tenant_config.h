// The `[tenants.NAME]` tables of kad's TOML config (DESIGN §8):
//
//   [tenants.default]            # every caller no other tenant names
//   sessions = 16
//   [tenants.lab]
//   weight = 2                   # share of a device against its priority class
//   priority = 1                 # higher classes go first
//   uids = [1000, 1001]          # UNIX socket peers
//   subjects = ["CN=lab,O=example"]   # client certificates (mutual TLS)
//   device_memory_bytes = 8589934592  # per device
//   queues = 64
//   streams = 32
//   channels = 32
//   module_bytes = 16777216
//   kernels = 512
//   launches_in_flight = 4096
//
// A bearer token names its tenant in the tokens file; a tenant only a token
// names has the default tenant's settings.
#pragma once

#include <toml++/toml.h>

#include <vector>

#include "absl/status/statusor.h"
#include "server/tenants.h"

namespace kad::server {

// The tenants of `file`, none when it has no `tenants` table.
// INVALID_ARGUMENT naming the tenant and key for an unknown key, a value of
// the wrong type or range, or a uid or subject that two tenants claim.
absl::StatusOr<std::vector<TenantSpec>> tenants_from_toml(const toml::table& file);

}  // namespace kad::server
