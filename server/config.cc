#include "server/config.h"

#include <toml++/toml.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/kernel_lowering.h"
#include "server/tenant_config.h"
#include "server/worker/worker_process.h"

namespace kad::server {

std::string default_socket_path() {
  // A service manager's runtime directory (systemd's RuntimeDirectory=kad
  // sets $RUNTIME_DIRECTORY; the first of several) is kad's, whoever runs it.
  if (const char* dir = std::getenv("RUNTIME_DIRECTORY"); dir && *dir) {
    const absl::string_view dirs = dir;
    return absl::StrCat(dirs.substr(0, dirs.find(':')), "/kad.sock");
  }
  if (geteuid() == 0) return "/run/kad/kad.sock";
  if (const char* dir = std::getenv("XDG_RUNTIME_DIR"); dir && *dir)
    return absl::StrCat(dir, "/kad.sock");
  return absl::StrCat("/tmp/kad-", geteuid(), ".sock");
}

ParseOutcome parse_config(int argc, char** argv) {
  ParseOutcome out;
  Config& c = out.config;
  CLI::App app{"kad — the device launch service daemon"};
  std::string config_file;
  std::vector<std::string> listen;
  app.add_option("--config", config_file, "TOML file with the same settings as these flags")
      ->check(CLI::ExistingFile);
  bool check_config = false;
  app.add_flag("--check-config", check_config,
               "check the flags and --config, say whether kad would start with them, and exit");
  app.add_option(
      "--listen", listen,
      "unix:PATH or tcp://HOST:PORT; repeatable (default unix:" + default_socket_path() + ")");
  app.add_option("--max-message-bytes", c.daemon.max_message_bytes,
                 "largest gRPC message accepted");
  app.add_option("--max-sessions", c.daemon.limits.max_sessions, "sessions served at once");
  app.add_option("--session-memory-quota", c.daemon.limits.max_buffer_bytes_per_session,
                 "device memory one session may hold, in bytes");
  app.add_option("--max-streams-per-session", c.daemon.limits.max_streams_per_session,
                 "Submit streams one session may hold open")
      ->check(CLI::Range(1u, 4096u));
  app.add_option("--max-channels-per-session", c.daemon.limits.max_channels_per_session,
                 "shared-memory channels one session may hold open")
      ->check(CLI::Range(1u, 4096u));
  app.add_option("--max-transfers-per-session", c.daemon.limits.max_transfers_per_session,
                 "transfers (WriteBuffer, ReadBuffer calls) one session may hold open")
      ->check(CLI::Range(1u, 4096u));
  app.add_option("--max-host-memory", c.daemon.limits.max_host_memory_bytes,
                 "bytes of kad's own host memory clients may make it hold: module copies, shared "
                 "buffers, channel rings (default: half of the machine's memory)");
  app.add_option("--max-compiled-kernels", c.daemon.limits.max_compiled_kernels,
                 "compiled kernels kad's cache keeps; past it the least recently used go")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24));
  app.add_option("--device-queue-depth", c.daemon.limits.device_queue_depth,
                 "launches a device shared by sessions in kad takes from all of them together; "
                 "past it they wait in kad and go in fair order by tenant (0: no scheduling)")
      ->check(CLI::Range(uint32_t{0}, uint32_t{1} << 16));
  app.add_option("--tls-cert", c.daemon.tls_cert, "PEM certificate: serve TCP with TLS");
  app.add_option("--tls-key", c.daemon.tls_key, "PEM private key for --tls-cert");
  app.add_option("--tls-client-ca", c.daemon.tls_client_ca,
                 "PEM CA: TCP clients must present a certificate it signed (mutual TLS)");
  app.add_option("--tokens", c.daemon.tokens_file,
                 "file of `TOKEN TENANT` lines: every TCP client must present one (read again "
                 "on SIGHUP)");
  app.add_flag("--allow-insecure-tcp", c.daemon.allow_insecure_tcp,
               "allow plaintext TCP on addresses other than loopback");
  std::string socket_mode = "0660";
  app.add_option("--socket-mode", socket_mode,
                 "mode of the UNIX sockets, in octal: who may connect (default 0660)");
  app.add_option("--socket-group", c.daemon.socket_group,
                 "group of the UNIX sockets (default: `kad` if that group exists)");
  app.add_option("--ready-file", c.ready_file, "write the bound URIs here once serving");
  app.add_option("--log-level", c.log_level, "trace, debug, info, warn, error");
  app.add_option("--metrics", c.daemon.metrics,
                 "tcp://HOST:PORT: Prometheus metrics on http://HOST:PORT/metrics (default: none)");
  app.add_option("--log-format", c.log_format,
                 "text (default) or json: one JSON object per line, for log collectors")
      ->check(CLI::IsMember({"text", "json"}));
  bool no_shm = false;
  app.add_flag("--no-shared-memory", no_shm, "serve local clients over gRPC only");
  app.add_option("--shm-stall-timeout-ms", c.daemon.shm.stall_timeout_ms,
                 "end a shared-memory channel whose client reads no completion this long");
  app.add_flag("--shm-direct,!--no-shm-direct", c.daemon.limits.shm_direct,
               "let a session's own worker serve its shared-memory channel's repeated "
               "launches (synchronous or pipelined) without kad (default: on)");
  std::string cache_dir;
  app.add_option("--cache-dir", cache_dir,
                 "folder for lowered GPU code, kept across restarts; \"off\": memory only");
  app.add_option("--cache-max-bytes", c.cache_max_bytes,
                 "bound of --cache-dir; least recently used code goes first");
  int64_t drain_timeout_s = absl::ToInt64Seconds(c.daemon.limits.finish_timeout);
  app.add_option("--drain-timeout", drain_timeout_s,
                 "seconds kad waits for launches to end when it drains (SIGTERM), closes a "
                 "session or frees memory they use")
      ->check(CLI::Range(int64_t{1}, int64_t{3600}));
  int64_t keepalive_time_s = absl::ToInt64Seconds(c.daemon.keepalive_time);
  int64_t keepalive_timeout_s = absl::ToInt64Seconds(c.daemon.keepalive_timeout);
  app.add_option("--keepalive-time", keepalive_time_s,
                 "seconds a client connection may be idle before kad pings it; with "
                 "--keepalive-timeout, how soon a vanished client's sessions are reclaimed")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}));
  app.add_option("--keepalive-timeout", keepalive_timeout_s,
                 "seconds kad waits for a ping's answer before it closes the connection")
      ->check(CLI::Range(int64_t{1}, int64_t{3600}));
  app.add_option("--compile-timeout", c.compile_timeout_s,
                 "seconds one compiler run on a client's kernel may take")
      ->check(CLI::Range(int64_t{1}, int64_t{3600}));
  app.add_option("--compile-memory-mib", c.compile_memory_mib,
                 "address space one compiler run on a client's kernel may use, in MiB")
      ->check(CLI::Range(uint64_t{256}, uint64_t{1} << 20));
  app.add_option("--submit-streams", c.submit_streams,
                 "how Submit streams are served: `threads` (a thread each, the lowest latency) "
                 "or `reactors` (no thread while a stream waits for its client; gRPC's callback "
                 "API, a round trip some 30 µs slower)")
      ->check(CLI::IsMember({"threads", "reactors"}));
  bool no_workers = false;
  app.add_flag("--no-workers", no_workers,
               "run client kernels inside kad itself, not in worker processes: for a single, "
               "trusted user only");
  app.add_option("--launch-timeout", c.launch_timeout_s,
                 "seconds a launch may run; past it kad stops its worker and the session gets "
                 "DEADLINE_EXCEEDED")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}));
  app.add_option("--worker-scope", c.worker_scope,
                 "whose kernels one worker runs: `session` (a worker each: a session's kernel "
                 "can reach only its own session's memory, and its crash or hang costs no one "
                 "else) or `device` (one worker per device, shared by every session on it: for "
                 "tenants that trust each other; a crash or a hang there costs every session on "
                 "the device its launches in progress)")
      ->check(CLI::IsMember({"session", "device"}));
  app.add_option("--worker-spares", c.worker_spares,
                 "workers kept started per CPU device, so a new session starts at once")
      ->check(CLI::Range(0, 64));
  // PoCL's pthread driver starts a thread per core; compilers, kad's own
  // threads in the worker and a margin come on top.
  c.worker_max_processes = 64 + 2 * std::max(1u, std::thread::hardware_concurrency());
  app.add_option("--worker-max-processes", c.worker_max_processes,
                 "processes and threads one worker may run at once, so that a client's code "
                 "cannot fork-bomb the machine (0: no bound; root is never bound: run kad as a "
                 "user of its own)")
      ->check(CLI::Range(0u, 1u << 20));
  c.worker_max_memory = worker::default_worker_max_memory();
  app.add_option("--worker-max-memory", c.worker_max_memory,
                 "bytes one worker may allocate for itself (heap, thread stacks; its session's "
                 "buffers are not counted), so that a client's code that takes its worker over "
                 "stops there, not at the machine's OOM killer (0: no bound)");
  c.worker_uid_base = worker::kDefaultWorkerUidBase;
  app.add_option("--worker-uid-base", c.worker_uid_base,
                 absl::StrFormat("when kad runs as root: each worker runs as a uid of its own, "
                                 "from this one to %d more (uids no user of the machine may "
                                 "have), so that root's processes are not its (0: workers run "
                                 "as root, bound to no process limit)",
                                 worker::kWorkerUidCount - 1))
      ->check(CLI::Range(0u, 0x7FFFFFFFu - (worker::kWorkerUidCount - 1)));
  app.add_option("--worker-max-folder-bytes", c.worker_max_folder_bytes,
                 "bytes one worker's folder (its temporary files and caches, the only folder it "
                 "may write) may hold, in a tmpfs of its own, so that a client's code cannot fill "
                 "the machine's disk or memory (0: no bound, the folder is on the disk)");
  app.add_flag("--worker-specialize", c.worker_specialize,
               "PoCL workers build a work-group function per work-group size (about 70 ms at a "
               "session's first launch of each kernel and size) rather than run the generic one "
               "every worker loads: faster kernels with barriers or local memory");
  app.add_option("--pocl-worker-driver", c.pocl_worker_driver,
                 "PoCL's driver in workers: `basic` (the worker's own threads run kernels without "
                 "a hand-off to a pool: several times the launches per second; a kernel whose "
                 "launches take 1 ms or more runs on a thread of its queue's own, and one of "
                 "several work-groups measured faster on every core on pthread's pool beside it) "
                 "or `pthread` (a pool of PoCL's threads runs every kernel on every core)")
      ->check(CLI::IsMember({"pthread", "basic"}));
  app.add_option("--worker-malloc", c.worker_malloc,
                 "Workers' allocator: `glibc` or `tcmalloc` (preloaded where the machine has "
                 "libtcmalloc_minimal.so.4: PoCL allocates per launch, and glibc's malloc takes a "
                 "lock for it in a process with threads; faster pipelines, slower with many more "
                 "sessions than cores)")
      ->check(CLI::IsMember({"tcmalloc", "glibc"}));
  app.add_option("--worker-fd", c.worker_fd)->group("");  // kad starts its workers with these
  app.add_option("--worker-device", c.worker_device)->group("");
  app.add_option("--worker-dir", c.worker_dir)->group("");
  app.add_option("--toolchain-version", c.toolchain_version)->group("");
  app.add_flag("--null-device", c.null_device,
               "serve null:0 too, a device whose kernels do nothing: kad's own cost, measured");
  app.add_flag("--cuda-prefer-blocks", c.cuda_prefer_blocks,
               "CUDA: tune for at least one block per SM, with fewer threads per block");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    out.exit = true;
    out.exit_code = e.get_exit_code();
    out.message = e.get_exit_code() == 0 ? app.help() : absl::StrCat("kad: ", e.what());
    return out;
  }

  std::string bad_setting;  // the first TOML value kad cannot take
  if (!config_file.empty()) {
    try {
      const toml::table file = toml::parse_file(config_file);
      // A key kad does not know is a mistake the operator should hear of
      // (a typo would otherwise leave a default in force unsaid).
      static constexpr std::string_view kKeys[] = {"listen",
                                                   "max_message_bytes",
                                                   "max_sessions",
                                                   "session_memory_quota",
                                                   "max_host_memory",
                                                   "max_compiled_kernels",
                                                   "device_queue_depth",
                                                   "tls_cert",
                                                   "tls_key",
                                                   "tls_client_ca",
                                                   "tokens",
                                                   "allow_insecure_tcp",
                                                   "socket_mode",
                                                   "socket_group",
                                                   "log_level",
                                                   "log_format",
                                                   "submit_streams",
                                                   "metrics",
                                                   "cache_dir",
                                                   "cache_max_bytes",
                                                   "compile_memory_mib",
                                                   "drain_timeout",
                                                   "keepalive_time",
                                                   "keepalive_timeout",
                                                   "compile_timeout",
                                                   "workers",
                                                   "launch_timeout",
                                                   "worker_spares",
                                                   "worker_scope",
                                                   "worker_max_processes",
                                                   "worker_max_folder_bytes",
                                                   "worker_max_memory",
                                                   "worker_uid_base",
                                                   "worker_specialize",
                                                   "pocl_worker_driver",
                                                   "worker_malloc",
                                                   "cuda_prefer_blocks",
                                                   "tenants"};
      for (const auto& [key, value] : file) {
        if (std::find(std::begin(kKeys), std::end(kKeys), key.str()) == std::end(kKeys)) {
          out.exit = true;
          out.exit_code = 2;
          out.message =
              absl::StrFormat("kad: %s: `%s` is not a setting kad knows (line %d)", config_file,
                              std::string(key.str()), key.source().begin.line);
          return out;
        }
      }
      if (const toml::array* uris = file["listen"].as_array()) {
        for (const auto& u : *uris)
          if (auto s = u.value<std::string>()) c.daemon.listen.push_back(*s);
      }
      auto set_u64 = [&](const char* key, uint64_t& field, const CLI::Option* flag) {
        if (flag && flag->count() > 0) return;  // the flag wins
        if (!file.contains(key)) return;
        if (auto v = file[key].value_exact<int64_t>(); v && *v >= 0) {
          field = static_cast<uint64_t>(*v);
        } else if (bad_setting.empty()) {  // not a default left in force unsaid
          bad_setting = absl::StrFormat("%s must be a whole number, 0 or more", key);
        }
      };
      set_u64("max_message_bytes", c.daemon.max_message_bytes,
              app.get_option("--max-message-bytes"));
      set_u64("max_sessions", c.daemon.limits.max_sessions, app.get_option("--max-sessions"));
      set_u64("session_memory_quota", c.daemon.limits.max_buffer_bytes_per_session,
              app.get_option("--session-memory-quota"));
      set_u64("max_host_memory", c.daemon.limits.max_host_memory_bytes,
              app.get_option("--max-host-memory"));
      set_u64("max_compiled_kernels", c.daemon.limits.max_compiled_kernels,
              app.get_option("--max-compiled-kernels"));
      // A 32-bit setting from the file, within `max`; false (the message
      // set) past it.
      auto set_u32 = [&](const char* key, uint32_t& field, const CLI::Option* flag, uint64_t max) {
        uint64_t value = field;
        set_u64(key, value, flag);
        if (value > max) {
          out.exit = true;
          out.exit_code = 2;
          out.message = absl::StrCat("kad: ", config_file, ": ", key, " is ", value,
                                     ", more than the maximum of ", max);
          return false;
        }
        field = static_cast<uint32_t>(value);
        return true;
      };
      set_u64("worker_max_folder_bytes", c.worker_max_folder_bytes,
              app.get_option("--worker-max-folder-bytes"));
      set_u64("worker_max_memory", c.worker_max_memory, app.get_option("--worker-max-memory"));
      if (!set_u32("device_queue_depth", c.daemon.limits.device_queue_depth,
                   app.get_option("--device-queue-depth"), uint64_t{1} << 16) ||
          !set_u32("worker_max_processes", c.worker_max_processes,
                   app.get_option("--worker-max-processes"), uint64_t{1} << 20) ||
          !set_u32("worker_uid_base", c.worker_uid_base, app.get_option("--worker-uid-base"),
                   0x7FFFFFFFu - (worker::kWorkerUidCount - 1)))
        return out;
      if (app.get_option("--tls-cert")->count() == 0)
        c.daemon.tls_cert = file["tls_cert"].value_or(c.daemon.tls_cert);
      if (app.get_option("--tls-key")->count() == 0)
        c.daemon.tls_key = file["tls_key"].value_or(c.daemon.tls_key);
      if (app.get_option("--tls-client-ca")->count() == 0)
        c.daemon.tls_client_ca = file["tls_client_ca"].value_or(c.daemon.tls_client_ca);
      if (app.get_option("--tokens")->count() == 0)
        c.daemon.tokens_file = file["tokens"].value_or(c.daemon.tokens_file);
      if (app.get_option("--socket-mode")->count() == 0)
        socket_mode = file["socket_mode"].value_or(socket_mode);
      if (app.get_option("--socket-group")->count() == 0)
        c.daemon.socket_group = file["socket_group"].value_or(c.daemon.socket_group);
      if (app.get_option("--log-level")->count() == 0)
        c.log_level = file["log_level"].value_or(c.log_level);
      if (app.get_option("--metrics")->count() == 0)
        c.daemon.metrics = file["metrics"].value_or(c.daemon.metrics);
      if (app.get_option("--log-format")->count() == 0)
        c.log_format = file["log_format"].value_or(c.log_format);
      if (app.get_option("--submit-streams")->count() == 0)
        c.submit_streams = file["submit_streams"].value_or(c.submit_streams);
      if (app.get_option("--cache-dir")->count() == 0) {
        if (auto dir = file["cache_dir"].value<std::string>()) cache_dir = *dir;
      }
      set_u64("cache_max_bytes", c.cache_max_bytes, app.get_option("--cache-max-bytes"));
      set_u64("compile_memory_mib", c.compile_memory_mib, app.get_option("--compile-memory-mib"));
      if (app.get_option("--drain-timeout")->count() == 0)
        drain_timeout_s = file["drain_timeout"].value_or(drain_timeout_s);
      if (app.get_option("--keepalive-time")->count() == 0)
        keepalive_time_s = file["keepalive_time"].value_or(keepalive_time_s);
      if (app.get_option("--keepalive-timeout")->count() == 0)
        keepalive_timeout_s = file["keepalive_timeout"].value_or(keepalive_timeout_s);
      if (app.get_option("--compile-timeout")->count() == 0)
        c.compile_timeout_s = file["compile_timeout"].value_or(c.compile_timeout_s);
      if (app.get_option("--no-workers")->count() == 0)
        no_workers = !file["workers"].value_or(!no_workers);
      if (app.get_option("--launch-timeout")->count() == 0)
        c.launch_timeout_s = file["launch_timeout"].value_or(c.launch_timeout_s);
      if (app.get_option("--worker-spares")->count() == 0)
        c.worker_spares = file["worker_spares"].value_or(c.worker_spares);
      if (app.get_option("--worker-scope")->count() == 0)
        c.worker_scope = file["worker_scope"].value_or(c.worker_scope);
      if (app.get_option("--worker-specialize")->count() == 0)
        c.worker_specialize = file["worker_specialize"].value_or(c.worker_specialize);
      if (app.get_option("--pocl-worker-driver")->count() == 0)
        c.pocl_worker_driver = file["pocl_worker_driver"].value_or(c.pocl_worker_driver);
      if (app.get_option("--worker-malloc")->count() == 0)
        c.worker_malloc = file["worker_malloc"].value_or(c.worker_malloc);
      if (app.get_option("--cuda-prefer-blocks")->count() == 0)
        c.cuda_prefer_blocks = file["cuda_prefer_blocks"].value_or(c.cuda_prefer_blocks);
      if (app.get_option("--allow-insecure-tcp")->count() == 0)
        c.daemon.allow_insecure_tcp =
            file["allow_insecure_tcp"].value_or(c.daemon.allow_insecure_tcp);
      absl::StatusOr<std::vector<TenantSpec>> tenants = tenants_from_toml(file);
      if (!tenants.ok()) {
        out.exit = true;
        out.exit_code = 2;
        out.message = absl::StrCat("kad: ", config_file, ": ", tenants.status().message());
        return out;
      }
      c.daemon.limits.tenants = *std::move(tenants);
    } catch (const toml::parse_error& e) {
      out.exit = true;
      out.exit_code = 2;
      out.message = absl::StrCat("kad: ", config_file, ": ", std::string(e.description()),
                                 " at line ", e.source().begin.line);
      return out;
    }
  }
  if (!bad_setting.empty()) {
    out.exit = true;
    out.exit_code = 2;
    out.message = absl::StrCat("kad: ", config_file, ": ", bad_setting);
    return out;
  }
  if (no_shm) c.daemon.shared_memory = false;
  c.workers = !no_workers;
  // Settings that name one of two choices, from the file (the flags are checked).
  for (const auto& [key, value, first, second] :
       {std::tuple<const char*, const std::string&, const char*, const char*>{
            "submit_streams", c.submit_streams, "threads", "reactors"},
        {"pocl_worker_driver", c.pocl_worker_driver, "pthread", "basic"},
        {"worker_malloc", c.worker_malloc, "glibc", "tcmalloc"},
        {"worker_scope", c.worker_scope, "session", "device"},
        {"log_format", c.log_format, "text", "json"}}) {
    if (value != first && value != second) {
      out.exit = true;
      out.exit_code = 2;
      out.message =
          absl::StrCat("kad: ", key, " `", value, "` is neither `", first, "` nor `", second, "`");
      return out;
    }
  }
  c.daemon.submit_streams =
      c.submit_streams == "reactors" ? SubmitStreams::kReactors : SubmitStreams::kThreads;
  if (c.launch_timeout_s < 1 || c.worker_spares < 0 || c.worker_spares > 64) {
    out.exit = true;
    out.exit_code = 2;
    out.message = absl::StrFormat(
        "kad: launch_timeout must be at least 1 s (is %d) and worker_spares within 0..64 (is %d)",
        c.launch_timeout_s, c.worker_spares);
    return out;
  }
  {
    // Octal digits only, as chmod takes them: "0660", "660", "600".
    char* end = nullptr;
    const unsigned long mode = std::strtoul(socket_mode.c_str(), &end, 8);
    if (socket_mode.empty() || *end != '\0' || mode > 0777) {
      out.exit = true;
      out.exit_code = 2;
      out.message = absl::StrCat("kad: --socket-mode `", socket_mode,
                                 "` is not a file mode in octal (such as 0660 or 0600)");
      return out;
    }
    c.daemon.socket_mode = static_cast<uint32_t>(mode);
  }
  c.daemon.limits.finish_timeout = absl::Seconds(drain_timeout_s);
  if (keepalive_time_s < 1 || keepalive_time_s > 86400 || keepalive_timeout_s < 1 ||
      keepalive_timeout_s > 3600) {
    out.exit = true;
    out.exit_code = 2;
    out.message = absl::StrFormat(
        "kad: keepalive_time must be within 1..86400 s (is %d) and keepalive_timeout within "
        "1..3600 s (is %d)",
        keepalive_time_s, keepalive_timeout_s);
    return out;
  }
  c.daemon.keepalive_time = absl::Seconds(keepalive_time_s);
  c.daemon.keepalive_timeout = absl::Seconds(keepalive_timeout_s);
  if (!cache_dir.empty()) c.cache_dir = cache_dir == "off" ? std::string() : cache_dir;
  if (!listen.empty()) c.daemon.listen = listen;
  if (c.daemon.listen.empty()) c.daemon.listen.push_back("unix:" + default_socket_path());
  if (check_config) {
    out.exit = true;
    out.exit_code = 0;
    out.message = config_file.empty()
                      ? "kad: the flags are valid"
                      : absl::StrCat("kad: ", config_file, " and the flags are valid");
  }
  return out;
}

std::vector<std::string> worker_args(const Config& config) {
  std::vector<std::string> args{absl::StrCat("--log-level=", config.log_level),
                                absl::StrCat("--log-format=", config.log_format),
                                absl::StrCat("--compile-timeout=", config.compile_timeout_s),
                                absl::StrCat("--compile-memory-mib=", config.compile_memory_mib),
                                absl::StrCat("--cache-max-bytes=", config.cache_max_bytes)};
  if (config.cache_dir) {
    args.push_back(
        absl::StrCat("--cache-dir=", config.cache_dir->empty() ? "off" : *config.cache_dir));
  }
  if (config.cuda_prefer_blocks) args.push_back("--cuda-prefer-blocks");
  if (config.worker_specialize) args.push_back("--worker-specialize");
  if (KernelLowering& lowering = KernelLowering::shared(); lowering.toolchain_status().ok())
    args.push_back(absl::StrCat("--toolchain-version=", lowering.version()));
  return args;
}

}  // namespace kad::server
