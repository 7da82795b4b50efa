#include "server/metrics_exposition.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kad::server {
namespace {

// One metric family: its HELP and TYPE lines, then its samples.
class Family {
 public:
  Family(std::string& out, absl::string_view name, absl::string_view type, absl::string_view help)
      : out_(out), name_(name) {
    absl::StrAppend(&out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  // `labels`: `key="value"` pairs joined by commas, values escaped already.
  // A histogram's series: `suffix` is _bucket, _sum or _count.
  void sample_as(absl::string_view suffix, double value, absl::string_view labels) {
    absl::StrAppend(&out_, name_, suffix, "{", labels, "} ", absl::StrFormat("%.15g", value), "\n");
  }
  void sample(double value, absl::string_view labels = {}) {
    absl::StrAppend(&out_, name_, labels.empty() ? "" : "{", labels, labels.empty() ? "" : "}", " ",
                    absl::StrFormat("%.15g", value), "\n");
  }

 private:
  std::string& out_;
  std::string name_;
};

std::string label(absl::string_view key, absl::string_view value) {
  return absl::StrCat(key, "=\"", prometheus_label_value(value), "\"");
}

}  // namespace

std::string prometheus_label_value(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string prometheus_text(const EngineCounters& c, const RequestCounters& requests) {
  std::string out;
  auto gauge = [&](absl::string_view name, absl::string_view help, double value) {
    Family(out, name, "gauge", help).sample(value);
  };
  auto counter = [&](absl::string_view name, absl::string_view help, double value) {
    Family(out, name, "counter", help).sample(value);
  };
  gauge("kad_sessions", "Sessions open.", c.sessions);
  counter("kad_sessions_opened_total", "Sessions opened since kad started.", c.sessions_opened);
  gauge("kad_sessions_busy",
        "Sessions busy while kad counted (waiting on their workers): not in the other counts.",
        c.sessions_busy);
  gauge("kad_tenants", "Tenants known (configured, or named by a token).", c.tenants.size());
  gauge("kad_buffers", "Buffers allocated, all sessions.", c.buffers);
  gauge("kad_modules", "Modules loaded, all sessions.", c.modules);
  gauge("kad_kernels", "Kernels got, all sessions.", c.kernels);
  gauge("kad_queues", "Queues open, all sessions.", c.queues);
  gauge("kad_queue_depth", "Launches submitted and not yet waited for, all queues.", c.queue_depth);
  gauge("kad_channels_lent",
        "Shared-memory channels lent to their sessions' workers now (--shm-direct).",
        c.channels_lent);
  counter("kad_channel_loans_total", "Shared-memory channels lent to workers (--shm-direct).",
          c.channel_loans);
  {
    Family f(out, "kad_channel_loan_ends_total", "counter",
             "Loans of shared-memory channels that ended, by why (--shm-direct).");
    for (size_t i = 0; i < kLoanEnds; ++i)
      f.sample(c.loan_ends[i], label("reason", loan_end_name(static_cast<LoanEnd>(i))));
  }
  counter("kad_lent_launches_total",
          "Launches workers served on lent channels (in kad_device_launches_total too).",
          c.lent_launches);
  gauge("kad_draining", "1 while kad drains (SIGTERM), else 0.", c.draining ? 1 : 0);
  gauge("kad_host_memory_bytes", "Host memory clients make kad hold (--max-host-memory counts it).",
        c.host_memory_bytes);
  gauge("kad_host_memory_limit_bytes", "--max-host-memory.", c.host_memory_limit);

  gauge("kad_cache_entries", "Compiled kernels in the cache.", c.cache.entries);
  gauge("kad_cache_max_entries", "--max-compiled-kernels.", c.cache.max_entries);
  gauge("kad_cache_bytes", "Bytes of kad's memory the cache's entries hold (program binaries).",
        c.cache.bytes);
  gauge("kad_cache_max_bytes", "The cache's bound on those bytes: half of --max-host-memory.",
        c.cache.max_bytes);
  counter("kad_cache_hits_total", "Launches served by a compiled kernel in the cache.",
          c.cache.hits);
  counter("kad_cache_misses_total", "Compiles the cache ran (each a miss), failed ones included.",
          c.cache.compilations + c.cache.failures);
  counter("kad_cache_compile_failures_total", "Compiles that failed.", c.cache.failures);
  counter("kad_cache_evictions_total", "Compiled kernels dropped, least recently used first.",
          c.cache.evictions);
  counter("kad_cache_compile_seconds_total", "Seconds spent compiling.", c.cache.compile_seconds);

  gauge("kad_workers", "Worker processes running (sessions' and spares).", c.workers.running);
  counter("kad_worker_starts_total", "Worker processes started.", c.workers.started);
  {
    Family f(out, "kad_worker_exits_total", "counter",
             "Workers that ended abnormally and were replaced, by why.");
    f.sample(c.workers.crashed, label("reason", "crashed"));
    f.sample(c.workers.timed_out, label("reason", "timed_out"));
  }
  {
    Family f(out, "kad_worker_wide_builds_total", "counter",
             "Kernels' builds for every core in workers (PoCL's pthread beside basic), by where "
             "they came from: a compile worker, kad's code cache, or none (failed).");
    f.sample(c.workers.wide_built, label("source", "built"));
    f.sample(c.workers.wide_from_cache, label("source", "code_cache"));
    f.sample(c.workers.wide_failed, label("source", "failed"));
  }

  struct PerDevice {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const EngineCounters::PerDevice&);
  };
  const PerDevice per_device[] = {
      {"kad_device_launches_total", "counter", "Launches on the device.",
       [](const EngineCounters::PerDevice& d) { return double(d.launches); }},
      {"kad_device_buffers", "gauge", "Buffers on the device.",
       [](const EngineCounters::PerDevice& d) { return double(d.buffers); }},
      {"kad_device_memory_bytes", "gauge", "Bytes of the device's memory in buffers.",
       [](const EngineCounters::PerDevice& d) { return double(d.buffer_bytes); }},
      {"kad_device_queues", "gauge", "Queues on the device.",
       [](const EngineCounters::PerDevice& d) { return double(d.queues); }},
      {"kad_device_in_flight", "gauge", "Launches on the device now.",
       [](const EngineCounters::PerDevice& d) { return double(d.in_flight); }},
      {"kad_device_waiting", "gauge", "Launches waiting in kad for room on the device.",
       [](const EngineCounters::PerDevice& d) { return double(d.held); }},
      {"kad_device_queue_depth_limit", "gauge",
       "Launches the device takes at once from all sessions (0: unscheduled).",
       [](const EngineCounters::PerDevice& d) { return double(d.queue_depth); }},
      {"kad_device_contended_depth", "gauge",
       "Launches the device takes at once while queues compete (0: unscheduled).",
       [](const EngineCounters::PerDevice& d) { return double(d.contended_depth); }},
  };
  for (const PerDevice& m : per_device) {
    Family f(out, m.name, m.type, m.help);
    for (const auto& d : c.devices) f.sample(m.value(d), label("device", d.id));
  }

  {
    Family f(out, "kad_launch_latency_seconds", "histogram",
             "Seconds from kad accepting a launch to kad learning it ended (a wait on it, or "
             "the device's scheduler freeing its slot), per device.");
    for (const auto& d : c.devices) {
      const LatencyHistogram::Snapshot& h = d.launch_latency;
      uint64_t cumulative = 0;
      for (size_t b = 0; b < h.counts.size(); ++b) {
        cumulative += h.counts[b];
        const std::string le = b < LatencyHistogram::kBounds.size()
                                   ? absl::StrFormat("%g", LatencyHistogram::kBounds[b])
                                   : std::string("+Inf");
        f.sample_as("_bucket", static_cast<double>(cumulative),
                    absl::StrCat(label("device", d.id), ",", label("le", le)));
      }
      f.sample_as("_sum", h.sum_seconds, label("device", d.id));
      f.sample_as("_count", static_cast<double>(h.count), label("device", d.id));
    }
  }

  auto quota_labels = [](const EngineCounters::TenantUse& t,
                         const EngineCounters::TenantUse::Use& u) {
    std::string labels = absl::StrCat(label("tenant", t.name), ",", label("quota", u.quota));
    if (!u.device.empty()) absl::StrAppend(&labels, ",", label("device", u.device));
    return labels;
  };
  struct PerQuota {
    const char* name;
    const char* type;
    const char* help;
    uint64_t EngineCounters::TenantUse::Use::*value;
  };
  const PerQuota per_quota[] = {
      {"kad_tenant_quota_used", "gauge", "A tenant's use of a quota.",
       &EngineCounters::TenantUse::Use::used},
      {"kad_tenant_quota_limit", "gauge", "A tenant's quota.",
       &EngineCounters::TenantUse::Use::limit},
      {"kad_quota_refusals_total", "counter",
       "Requests refused (RESOURCE_EXHAUSTED) at a tenant's quota.",
       &EngineCounters::TenantUse::Use::refusals},
  };
  for (const PerQuota& m : per_quota) {
    Family f(out, m.name, m.type, m.help);
    for (const auto& t : c.tenants) {
      for (const auto& u : t.uses) f.sample(static_cast<double>(u.*m.value), quota_labels(t, u));
    }
  }

  {
    Family f(out, "kad_requests_total", "counter",
             "gRPC requests kad answered, by method and status code.");
    for (int m = 0; m < static_cast<int>(requests.methods().size()); ++m) {
      for (int code = 0; code < RequestCounters::kCodes; ++code) {
        if (const uint64_t n = requests.requests(m, code); n > 0) {
          f.sample(
              n, absl::StrCat(
                     label("method", requests.methods()[m]), ",",
                     label("code", absl::StatusCodeToString(static_cast<absl::StatusCode>(code)))));
        }
      }
    }
  }
  {
    Family f(out, "kad_bytes_copied_total", "counter",
             "Bytes that buffer copies moved, by transport and direction (zero-copy buffers "
             "move none).");
    for (const auto& [via, name] : {std::pair{RequestCounters::Transport::kGrpc, "grpc"},
                                    std::pair{RequestCounters::Transport::kSharedMemory, "shm"}}) {
      for (const bool to_device : {true, false}) {
        f.sample(static_cast<double>(requests.copied(via, to_device)),
                 absl::StrCat(label("transport", name), ",",
                              label("direction", to_device ? "to_device" : "from_device")));
      }
    }
  }
  {
    Family f(out, "kad_queue_commands_failed_total", "counter",
             "Queue commands (Submit streams, shared-memory channels) answered with an error, "
             "by status code.");
    for (int code = 1; code < RequestCounters::kCodes; ++code) {
      if (const uint64_t n = requests.commands(code); n > 0) {
        f.sample(n, label("code", absl::StatusCodeToString(static_cast<absl::StatusCode>(code))));
      }
    }
  }
  return out;
}

}  // namespace kad::server
