#include "core/code_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <system_error>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/module.h"

namespace kad {
namespace fs = std::filesystem;
namespace {

constexpr absl::string_view kMagic = "kad-code-cache 1\n";

// Header: magic, "<key bytes> <payload bytes> <payload sha256>\n", key, payload.
std::string encode(absl::string_view key, absl::string_view payload) {
  return absl::StrCat(kMagic, key.size(), " ", payload.size(), " ", sha256_hex(payload), "\n", key,
                      payload);
}

// The payload of a well-formed entry for `key`, else nullopt.
std::optional<std::string> decode(absl::string_view file, absl::string_view key) {
  if (file.substr(0, kMagic.size()) != kMagic) return std::nullopt;
  file.remove_prefix(kMagic.size());
  const size_t eol = file.find('\n');
  if (eol == absl::string_view::npos) return std::nullopt;
  const absl::string_view header = file.substr(0, eol);
  file.remove_prefix(eol + 1);
  const size_t s1 = header.find(' ');
  const size_t s2 = header.find(' ', s1 == absl::string_view::npos ? s1 : s1 + 1);
  if (s1 == absl::string_view::npos || s2 == absl::string_view::npos) return std::nullopt;
  uint64_t key_size = 0, payload_size = 0;
  if (!absl::SimpleAtoi(header.substr(0, s1), &key_size) ||
      !absl::SimpleAtoi(header.substr(s1 + 1, s2 - s1 - 1), &payload_size)) {
    return std::nullopt;
  }
  if (key_size != key.size() || file.size() != key_size + payload_size) return std::nullopt;
  if (file.substr(0, key_size) != key) return std::nullopt;
  const absl::string_view payload = file.substr(key_size);
  if (sha256_hex(payload) != header.substr(s2 + 1)) return std::nullopt;
  return std::string(payload);
}

std::string default_folder() {
  if (const char* dir = std::getenv("KAD_CACHE_DIR")) {
    const absl::string_view d = dir;
    return d == "off" ? std::string() : std::string(d);
  }
  // A service manager's cache directory (systemd's CacheDirectory=kad sets
  // $CACHE_DIRECTORY; the first of several) is kad's own already.
  if (const char* dir = std::getenv("CACHE_DIRECTORY"); dir && *dir) {
    const absl::string_view d = dir;
    return std::string(d.substr(0, d.find(':')));
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return absl::StrCat(xdg, "/kad");
  if (const char* home = std::getenv("HOME"); home && *home)
    return absl::StrCat(home, "/.cache/kad");
  return {};
}

}  // namespace

CodeCache::CodeCache(std::string folder, uint64_t max_bytes)
    : folder_(std::move(folder)), max_bytes_(max_bytes) {}

CodeCache CodeCache::from_environment() {
  uint64_t max_bytes = uint64_t{1} << 30;
  if (const char* m = std::getenv("KAD_CACHE_MAX_BYTES")) (void)absl::SimpleAtoi(m, &max_bytes);
  return CodeCache(default_folder(), max_bytes);
}

std::string CodeCache::path_for(absl::string_view key) const {
  return absl::StrCat(folder_, "/", sha256_hex(key), ".kadc");
}

std::optional<std::string> CodeCache::load(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  if (!enabled()) {
    ++stats_.misses;
    return std::nullopt;
  }
  const std::string path = path_for(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ++stats_.misses;
    return std::nullopt;
  }
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  std::optional<std::string> payload = decode(file, key);
  std::error_code ec;
  if (!payload) {
    fs::remove(path, ec);
    ++stats_.discarded;
    ++stats_.misses;
    return std::nullopt;
  }
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // most recently used
  ++stats_.hits;
  return payload;
}

void CodeCache::store(absl::string_view key, absl::string_view payload) {
  absl::MutexLock lock(&mu_);
  if (!enabled()) return;
  std::error_code ec;
  fs::create_directories(folder_, ec);
  const std::string path = path_for(key);
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid(), ".", std::random_device{}());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    const std::string file = encode(key, payload);
    out.write(file.data(), static_cast<std::streamsize>(file.size()));
    if (!out) {
      out.close();
      fs::remove(temporary, ec);
      return;
    }
  }
  fs::rename(temporary, path, ec);  // atomic: readers see the old entry or the new one
  if (ec) {
    fs::remove(temporary, ec);
    return;
  }
  ++stats_.stores;
  evict_locked();
}

void CodeCache::evict_locked() {
  struct Entry {
    fs::file_time_type used;
    uint64_t bytes;
    fs::path path;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(folder_, ec)) {
    if (e.path().extension() != ".kadc") continue;
    std::error_code entry_ec;
    const uint64_t bytes = e.file_size(entry_ec);
    const fs::file_time_type used = e.last_write_time(entry_ec);
    if (entry_ec) continue;
    entries.push_back({used, bytes, e.path()});
    total += bytes;
  }
  if (total <= max_bytes_) return;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (const Entry& e : entries) {
    if (total <= max_bytes_) break;
    if (fs::remove(e.path, ec)) {
      total -= e.bytes;
      ++stats_.evicted;
    }
  }
}

CodeCache::Stats CodeCache::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace kad
