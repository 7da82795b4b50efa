// The on-disk half of the compiled-kernel cache (DESIGN §5): lowered code
// (PTX, SPIR-V, AMDGCN code objects, SPIR bitcode) stored under the SHA-256 of
// the key that produced it, so a restarted daemon — or a GPU machine with no
// compiler of ours — does not lower again.
//
// Each entry is one file, written to a temporary name and renamed into place,
// carrying its full key and the SHA-256 of its payload: an entry whose key or
// digest does not match is deleted and rebuilt, never trusted. The folder is
// bounded; when a store takes it over the bound, the least recently used
// entries (by modification time, touched on every hit) are evicted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace kad {

class CodeCache {
 public:
  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t stores = 0;
    uint64_t discarded = 0;  // corrupt or mismatched entries deleted
    uint64_t evicted = 0;
  };

  // An empty folder disables the cache (every lookup misses, stores are dropped).
  CodeCache(std::string folder, uint64_t max_bytes);

  // The folder named by KAD_CACHE_DIR ("" or "off" disables it), else
  // $XDG_CACHE_HOME/kad, else $HOME/.cache/kad; bounded by
  // KAD_CACHE_MAX_BYTES (default 1 GiB).
  static CodeCache from_environment();

  const std::string& folder() const { return folder_; }
  bool enabled() const { return !folder_.empty(); }

  std::optional<std::string> load(absl::string_view key);
  // Best effort: a full disk or a read-only folder loses the entry, nothing else.
  void store(absl::string_view key, absl::string_view payload);

  Stats stats() const;

 private:
  std::string path_for(absl::string_view key) const;
  void evict_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::string folder_;
  uint64_t max_bytes_;
  mutable absl::Mutex mu_;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kad
