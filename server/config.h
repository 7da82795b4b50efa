// The daemon's configuration: command-line flags, and an optional TOML file
// (--config) for the same settings; a flag wins over the file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/daemon.h"
#include "server/listen_address.h"

namespace kad::server {

struct Config {
  DaemonOptions daemon;    // what server::Daemon serves, and how
  std::string ready_file;  // written with the bound URIs once serving
  std::string log_level = "info";
  std::string log_format = "text";         // or "json": one JSON object per line
  std::string submit_streams = "threads";  // or "reactors" (server/kad_service.h)
  bool null_device = false;                // null:0, kernels that do nothing (backends/null/)
  bool cuda_prefer_blocks = false;         // CUDA tuning prefers more blocks to more threads
  // Lowered GPU code on disk (DESIGN §5). Unset: KAD_CACHE_DIR, else
  // $XDG_CACHE_HOME/kad, else ~/.cache/kad; "off" keeps it in memory only.
  std::optional<std::string> cache_dir;
  uint64_t cache_max_bytes = uint64_t{1} << 30;
  // Every compiler run on a client's code (DESIGN §8): wall-clock seconds and
  // address space. A compile past either fails that kernel, clearly.
  int64_t compile_timeout_s = 60;
  uint64_t compile_memory_mib = 4096;
  // Client kernels run in worker processes (DESIGN §8) unless --no-workers.
  bool workers = true;
  int64_t launch_timeout_s = 60;  // a launch running longer ends its worker
  int worker_spares = 1;          // workers kept started per CPU device
  // Whose kernels a worker runs: `session` (one worker each) or `device`
  // (one per device, shared by its sessions) (worker::WorkerScope).
  std::string worker_scope = "session";
  // Processes and threads one worker may run at once (0: no bound): its
  // driver's threads and compilers fit; a fork bomb does not. Set from the
  // machine's cores when the flags are parsed.
  uint32_t worker_max_processes = 0;
  // Bytes a worker's folder may hold, in a tmpfs of its own (0: no bound).
  uint64_t worker_max_folder_bytes = uint64_t{512} << 20;
  // Memory one worker may allocate for itself (0: no bound). Set from the
  // machine's cores when the flags are parsed
  // (worker::default_worker_max_memory).
  uint64_t worker_max_memory = 0;
  // Under a kad that runs as root, each worker runs as a uid of its own
  // from this one on (worker_uids.h); 0: as root. Set to the default when
  // the flags are parsed.
  uint32_t worker_uid_base = 0;
  // PoCL in workers builds a work-group function per work-group size (about
  // 70 ms at a worker's first launch of each kernel and size) instead of
  // running the program binary's generic one: faster kernels that use
  // barriers or local memory, slower first launches.
  bool worker_specialize = false;
  // PoCL's driver in workers: `basic` (the worker's own threads run each
  // kernel, in the enqueue: no hand-off to a pool and back per launch; a
  // kernel measured faster on every core runs on `pthread` beside it;
  // wide_choice.h) or `pthread` (PoCL's pool of threads runs every kernel,
  // on every core).
  std::string pocl_worker_driver = worker::kDefaultPoclWorkerDriver;
  // Workers' allocator: `glibc` or `tcmalloc` (preloaded where the machine
  // has it: worker::tcmalloc_library).
  std::string worker_malloc = "glibc";
  // Set when this process is a worker: `kad --worker-fd 3 --worker-device ID`.
  int worker_fd = -1;
  std::string worker_device;
  std::string worker_dir;         // the worker's own folder (its $TMPDIR), made and removed by kad
  std::string toolchain_version;  // the daemon's, told to its workers
};

// The flags a worker is started with: the settings it shares with its daemon.
std::vector<std::string> worker_args(const Config& config);

// The documented default: /run/kad/kad.sock as root, else
// $XDG_RUNTIME_DIR/kad.sock, else /tmp/kad-$UID.sock.
std::string default_socket_path();

// Parses argv (and the TOML file it names). Help and usage errors come back
// as a status whose message is the text to print; `exit_code` says how to exit.
struct ParseOutcome {
  Config config;
  bool exit = false;
  int exit_code = 0;
  std::string message;
};
ParseOutcome parse_config(int argc, char** argv);

}  // namespace kad::server
