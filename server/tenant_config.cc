#include "server/tenant_config.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kad::server {
namespace {

absl::Status bad(const std::string& tenant, std::string_view key, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrFormat("config: tenants.%s.%s %s", tenant, std::string(key), std::string(why)));
}

// A non-negative integer no larger than `max`.
absl::StatusOr<uint64_t> number(const std::string& tenant, std::string_view key,
                                const toml::node& value, uint64_t max) {
  std::optional<int64_t> v = value.value<int64_t>();
  if (!v || !value.is_integer()) return bad(tenant, key, "must be an integer");
  if (*v < 0 || static_cast<uint64_t>(*v) > max)
    return bad(tenant, key, absl::StrFormat("is %d; it must be 0 to %d", *v, max));
  return static_cast<uint64_t>(*v);
}

}  // namespace

absl::StatusOr<std::vector<TenantSpec>> tenants_from_toml(const toml::table& file) {
  std::vector<TenantSpec> out;
  const toml::node* node = file.get("tenants");
  if (node == nullptr) return out;
  const toml::table* tenants = node->as_table();
  if (tenants == nullptr)
    return absl::InvalidArgumentError("config: `tenants` must be a table of [tenants.NAME]");
  absl::flat_hash_map<uint32_t, std::string> uid_owner;
  absl::flat_hash_map<std::string, std::string> subject_owner;
  for (const auto& [name_key, value] : *tenants) {
    const std::string name(name_key.str());
    const toml::table* table = value.as_table();
    if (table == nullptr)
      return absl::InvalidArgumentError(
          absl::StrFormat("config: tenants.%s must be a table", name));
    TenantSpec spec;
    spec.name = name;
    for (const auto& [key_node, v] : *table) {
      const std::string key(key_node.str());
      bool known = false;
      for (int i = 0; i < kQuotaCount; ++i) {
        const Quota q = static_cast<Quota>(i);
        if (key != quota_key(q)) continue;
        absl::StatusOr<uint64_t> n = number(name, key, v, uint64_t{1} << 62);
        if (!n.ok()) return n.status();
        spec.quotas[q] = *n;
        known = true;
      }
      if (known) continue;
      if (key == "weight") {
        absl::StatusOr<uint64_t> n = number(name, key, v, 1000000);
        if (!n.ok()) return n.status();
        if (*n == 0) return bad(name, key, "is 0; a tenant's weight is at least 1");
        spec.weight = static_cast<uint32_t>(*n);
      } else if (key == "priority") {
        std::optional<int64_t> p = v.value<int64_t>();
        if (!p || !v.is_integer() || *p < -1000 || *p > 1000)
          return bad(name, key, "must be an integer from -1000 to 1000");
        spec.priority = static_cast<int32_t>(*p);
      } else if (key == "uids") {
        const toml::array* uids = v.as_array();
        if (uids == nullptr) return bad(name, key, "must be an array of uids");
        for (const auto& u : *uids) {
          absl::StatusOr<uint64_t> uid = number(name, key, u, 0xfffffffe);
          if (!uid.ok()) return uid.status();
          auto [it, fresh] = uid_owner.emplace(static_cast<uint32_t>(*uid), name);
          if (!fresh)
            return bad(
                name, key,
                absl::StrFormat("names uid %d, which tenant `%s` has already", *uid, it->second));
          spec.uids.push_back(static_cast<uint32_t>(*uid));
        }
      } else if (key == "subjects") {
        const toml::array* subjects = v.as_array();
        if (subjects == nullptr) return bad(name, key, "must be an array of strings");
        for (const auto& s : *subjects) {
          std::optional<std::string> subject = s.value<std::string>();
          if (!subject || subject->empty())
            return bad(name, key, "must hold certificate subjects (non-empty strings)");
          auto [it, fresh] = subject_owner.emplace(*subject, name);
          if (!fresh)
            return bad(name, key,
                       absl::StrFormat("names subject `%s`, which tenant `%s` has already",
                                       *subject, it->second));
          spec.subjects.push_back(*subject);
        }
      } else {
        std::string keys = "weight, priority, uids, subjects";
        for (int i = 0; i < kQuotaCount; ++i)
          keys += absl::StrCat(", ", quota_key(static_cast<Quota>(i)));
        return bad(name, key, absl::StrCat("is not a tenant setting (those are: ", keys, ")"));
      }
    }
    if (name == "default" && (!spec.uids.empty() || !spec.subjects.empty()))
      return bad(name, spec.uids.empty() ? "subjects" : "uids",
                 "cannot be set: the default tenant is whoever no other tenant names");
    out.push_back(std::move(spec));
  }
  return out;
}

}  // namespace kad::server
