// kactl: try kad from the shell.
//   kactl devices                      the daemon's devices and their limits
//   kactl status                       sessions, cache, launches per device
//   kactl run FILE.cl --entry NAME --ndrange 1024 --arg buf:float:1024=i --arg float:2
// The address comes from --connect, else $KAD_ADDRESS, else the default socket.
// Tables for people by default; --json for scripts.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kad/client.h"

namespace {

using kad::client::Arg;
using kad::client::ArgSpec;
using kad::client::Dims;
using kad::client::ScalarType;

std::string default_address() {
  if (const char* a = std::getenv("KAD_ADDRESS"); a && *a) return a;
  if (geteuid() == 0) return "unix:/run/kad/kad.sock";
  if (const char* dir = std::getenv("XDG_RUNTIME_DIR"); dir && *dir)
    return std::string("unix:") + dir + "/kad.sock";
  return absl::StrFormat("unix:/tmp/kad-%d.sock", geteuid());
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
      continue;
    }
    out += c;
  }
  return out;
}

int fail(const absl::Status& s) {
  std::fprintf(stderr, "kactl: %s\n", std::string(s.message()).c_str());
  return 1;
}

int cmd_devices(kad::Client& client, bool json) {
  auto devices = client.devices();
  if (!devices.ok()) return fail(devices.status());
  if (json) {
    std::vector<std::string> items;
    for (const auto& d : *devices) {
      items.push_back(absl::StrFormat(
          R"({"id":"%s","backend":"%s","name":"%s","platform":"%s","default":%s,"cpu":%s,)"
          R"("max_workgroup_size":%d,"compute_units":%d,"global_memory_bytes":%d})",
          json_escape(d.id), d.backend, json_escape(d.name), json_escape(d.platform),
          d.is_default ? "true" : "false", d.is_cpu ? "true" : "false", d.max_workgroup_size,
          d.compute_units, d.global_memory_bytes));
    }
    absl::PrintF("[%s]\n", absl::StrJoin(items, ",").c_str());
    return 0;
  }
  absl::PrintF("%-18s %-8s %-10s %-8s %-10s %s\n", "ID", "BACKEND", "WORKGROUP", "UNITS", "MEMORY",
               "NAME");
  for (const auto& d : *devices) {
    absl::PrintF("%-18s %-8s %-10llu %-8llu %-10s %s%s\n", d.id.c_str(), d.backend.c_str(),
                 static_cast<unsigned long long>(d.max_workgroup_size),
                 static_cast<unsigned long long>(d.compute_units),
                 absl::StrFormat("%d MiB", d.global_memory_bytes >> 20).c_str(), d.name.c_str(),
                 d.is_default ? " (default)" : "");
  }
  return 0;
}

int cmd_status(kad::Client& client, bool json) {
  auto s = client.status();
  if (!s.ok()) return fail(s.status());
  if (json) {
    std::vector<std::string> devices;
    for (const auto& d : s->devices) {
      devices.push_back(
          absl::StrFormat(R"({"id":"%s","launches":%d,"buffers":%d,"buffer_bytes":%d,"queues":%d,)"
                          R"("queue_depth":%d,"contended_depth":%d,"in_flight":%d,"held":%d,)"
                          R"("held_total":%d})",
                          json_escape(d.id), d.launches, d.buffers, d.buffer_bytes, d.queues,
                          d.queue_depth, d.contended_depth, d.in_flight, d.held, d.held_total));
    }
    std::vector<std::string> tenants;
    for (const auto& t : s->tenants) {
      std::vector<std::string> quotas;
      for (const auto& q : t.quotas) {
        quotas.push_back(absl::StrFormat(R"({"quota":"%s","device":"%s","used":%d,"limit":%d})",
                                         json_escape(q.quota), json_escape(q.device), q.used,
                                         q.limit));
      }
      tenants.push_back(absl::StrFormat(
          R"({"name":"%s","weight":%d,"priority":%d,"cpu_nice":%d,"quotas":[%s]})",
          json_escape(t.name), t.weight, t.priority, t.cpu_nice, absl::StrJoin(quotas, ",")));
    }
    absl::PrintF(R"({"sessions":%d,"sessions_opened":%d,"sessions_busy":%d,)"
                 R"("buffers":%d,"modules":%d,"kernels":%d,)"
                 R"("queues":%d,"cache_entries":%d,"cache_hits":%d,"cache_compilations":%d,)"
                 R"("cache_failures":%d,"cache_remembered_failures":%d,)"
                 R"("cache_evictions":%d,"cache_max_entries":%d,)"
                 R"("cache_bytes":%d,"cache_max_bytes":%d,)"
                 R"("launches":%d,"queue_depth":%d,"draining":%s,)"
                 R"("channels_lent":%d,"channel_loans":%d,"lent_launches":%d,)"
                 R"("workers_running":%d,"workers_started":%d,"workers_crashed":%d,)"
                 R"("workers_timed_out":%d,"workers_walls":"%s","host_memory_bytes":%d,)"
                 R"("host_memory_limit":%d,"devices":[%s],"tenants":[%s]})"
                 "\n",
                 s->sessions, s->sessions_opened, s->sessions_busy, s->buffers, s->modules,
                 s->kernels, s->queues, s->cache_entries, s->cache_hits, s->cache_compilations,
                 s->cache_failures, s->cache_remembered_failures, s->cache_evictions,
                 s->cache_max_entries, s->cache_bytes, s->cache_max_bytes, s->launches,
                 s->queue_depth, s->draining ? "true" : "false", s->channels_lent, s->channel_loans,
                 s->lent_launches, s->workers_running, s->workers_started, s->workers_crashed,
                 s->workers_timed_out, json_escape(s->workers_walls), s->host_memory_bytes,
                 s->host_memory_limit, absl::StrJoin(devices, ","), absl::StrJoin(tenants, ","));
    return 0;
  }
  absl::PrintF("sessions   %llu open (this one included), %llu opened in all%s\n",
               static_cast<unsigned long long>(s->sessions),
               static_cast<unsigned long long>(s->sessions_opened),
               s->sessions_busy == 0
                   ? ""
                   : absl::StrFormat("; %llu busy waiting on their workers, not counted below",
                                     static_cast<unsigned long long>(s->sessions_busy)));
  absl::PrintF(
      "objects    %llu buffers, %llu modules, %llu kernels, %llu queues\n",
      static_cast<unsigned long long>(s->buffers), static_cast<unsigned long long>(s->modules),
      static_cast<unsigned long long>(s->kernels), static_cast<unsigned long long>(s->queues));
  absl::PrintF(
      "cache      %llu entries of at most %llu, %llu of at most %llu bytes (%llu dropped, least "
      "recently used first), %llu hits, %llu compilations, %llu failed (%llu launches refused "
      "from memory)\n",
      static_cast<unsigned long long>(s->cache_entries),
      static_cast<unsigned long long>(s->cache_max_entries),
      static_cast<unsigned long long>(s->cache_bytes),
      static_cast<unsigned long long>(s->cache_max_bytes),
      static_cast<unsigned long long>(s->cache_evictions),
      static_cast<unsigned long long>(s->cache_hits),
      static_cast<unsigned long long>(s->cache_compilations),
      static_cast<unsigned long long>(s->cache_failures),
      static_cast<unsigned long long>(s->cache_remembered_failures));
  absl::PrintF("launches   %llu, %llu not yet waited for%s\n",
               static_cast<unsigned long long>(s->launches),
               static_cast<unsigned long long>(s->queue_depth), s->draining ? " (draining)" : "");
  if (s->channel_loans != 0) {
    absl::PrintF(
        "direct     %llu shared-memory channels lent to workers now, %llu loans, %llu launches "
        "served by workers on them\n",
        static_cast<unsigned long long>(s->channels_lent),
        static_cast<unsigned long long>(s->channel_loans),
        static_cast<unsigned long long>(s->lent_launches));
  }
  absl::PrintF(
      "workers    %llu running, %llu started, %llu ended by a kernel's crash, %llu stopped at a "
      "deadline\n",
      static_cast<unsigned long long>(s->workers_running),
      static_cast<unsigned long long>(s->workers_started),
      static_cast<unsigned long long>(s->workers_crashed),
      static_cast<unsigned long long>(s->workers_timed_out));
  if (!s->workers_walls.empty()) absl::PrintF("           confined by: %s\n", s->workers_walls);
  absl::PrintF("memory     %llu of %llu bytes of kad's host memory held for clients\n",
               static_cast<unsigned long long>(s->host_memory_bytes),
               static_cast<unsigned long long>(s->host_memory_limit));
  absl::PrintF("%-18s %-10s %-8s %-12s %-7s %s\n", "DEVICE", "LAUNCHES", "BUFFERS", "BYTES",
               "QUEUES",
               "SCHEDULED (on device/depth, contended depth, waiting in kad, ever waited)");
  for (const auto& d : s->devices) {
    const std::string scheduled =
        d.queue_depth == 0 ? std::string("-")
                           : absl::StrFormat("%d/%d, %d, %d, %d", d.in_flight, d.queue_depth,
                                             d.contended_depth, d.held, d.held_total);
    absl::PrintF("%-18s %-10llu %-8llu %-12llu %-7llu %s\n", d.id.c_str(),
                 static_cast<unsigned long long>(d.launches),
                 static_cast<unsigned long long>(d.buffers),
                 static_cast<unsigned long long>(d.buffer_bytes),
                 static_cast<unsigned long long>(d.queues), scheduled);
  }
  // Each tenant's use of its quotas, as "used/limit".
  for (const auto& t : s->tenants) {
    absl::PrintF("tenant %s (weight %d, priority %d; CPU niceness %d)\n", t.name, t.weight,
                 t.priority, t.cpu_nice);
    for (const auto& q : t.quotas) {
      absl::PrintF("  %-20s %-18s %llu/%llu\n", q.quota, q.device,
                   static_cast<unsigned long long>(q.used),
                   static_cast<unsigned long long>(q.limit));
    }
  }
  return 0;
}

// ---- kactl run ---------------------------------------------------------------

struct TypeInfo {
  const char* name;
  ScalarType type;
  size_t size;
  bool floating;
};
constexpr TypeInfo kTypes[] = {
    {"int", ScalarType::kI32, 4, false},  {"uint", ScalarType::kU32, 4, false},
    {"long", ScalarType::kI64, 8, false}, {"ulong", ScalarType::kU64, 8, false},
    {"float", ScalarType::kF32, 4, true}, {"double", ScalarType::kF64, 8, true},
};

const TypeInfo* find_type(const std::string& name) {
  for (const auto& t : kTypes)
    if (name == t.name) return &t;
  return nullptr;
}

// One --arg: a buffer (buf:/cbuf:TYPE:COUNT[=INIT]), a scalar (TYPE:VALUE)
// or local memory (local:BYTES). INIT is a*i+b with either part optional
// ("i", "3", "2*i+1", "0.5*i"); unset buffers start at 0.
struct BufferArg {
  const TypeInfo* type;
  uint64_t count;
  double a = 0, b = 0;
  bool is_const;
  kad::client::Buffer buffer;
};
using RunArg = std::variant<BufferArg, Arg>;

absl::StatusOr<std::pair<double, double>> parse_init(const std::string& expr) {
  static const std::regex linear(
      R"(^\s*(?:([-+]?[0-9.eE+-]+)\s*\*\s*)?i\s*(?:([-+])\s*([0-9.eE+-]+))?\s*$)");
  static const std::regex constant(R"(^\s*([-+]?[0-9.eE+-]+)\s*$)");
  std::smatch m;
  if (std::regex_match(expr, m, linear)) {
    const double a = m[1].matched ? std::stod(m[1]) : 1.0;
    double b = m[3].matched ? std::stod(m[3]) : 0.0;
    if (m[2].matched && m[2] == "-") b = -b;
    return std::make_pair(a, b);
  }
  if (std::regex_match(expr, m, constant)) return std::make_pair(0.0, std::stod(m[1]));
  return absl::InvalidArgumentError(
      absl::StrFormat("initialiser `%s` is not of the form a*i+b (e.g. i, 2*i+1, 3.5)", expr));
}

absl::StatusOr<RunArg> parse_arg(const std::string& spec) {
  std::vector<std::string> parts = absl::StrSplit(spec, absl::MaxSplits(':', 2));
  try {
    if ((parts[0] == "buf" || parts[0] == "cbuf") && parts.size() == 3) {
      const TypeInfo* t = find_type(parts[1]);
      if (t == nullptr) return absl::InvalidArgumentError("unknown element type in " + spec);
      BufferArg b{t, 0, 0, 0, parts[0] == "cbuf", {}};
      const size_t eq = parts[2].find('=');
      b.count = std::stoull(parts[2].substr(0, eq));
      if (eq != std::string::npos) {
        auto init = parse_init(parts[2].substr(eq + 1));
        if (!init.ok()) return init.status();
        std::tie(b.a, b.b) = *init;
      }
      return RunArg(b);
    }
    if (parts[0] == "local" && parts.size() == 2) return RunArg(Arg::local(std::stoull(parts[1])));
    if (parts.size() == 2) {
      const TypeInfo* t = find_type(parts[0]);
      if (t != nullptr) {
        switch (t->type) {
          case ScalarType::kI32:
            return RunArg(Arg::scalar<int32_t>(std::stoi(parts[1])));
          case ScalarType::kU32:
            return RunArg(Arg::scalar<uint32_t>(static_cast<uint32_t>(std::stoul(parts[1]))));
          case ScalarType::kI64:
            return RunArg(Arg::scalar<int64_t>(std::stoll(parts[1])));
          case ScalarType::kU64:
            return RunArg(Arg::scalar<uint64_t>(std::stoull(parts[1])));
          case ScalarType::kF32:
            return RunArg(Arg::scalar<float>(std::stof(parts[1])));
          case ScalarType::kF64:
            return RunArg(Arg::scalar<double>(std::stod(parts[1])));
          default:
            break;
        }
      }
    }
  } catch (const std::exception&) {
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "argument `%s` is not buf:TYPE:COUNT[=INIT], cbuf:TYPE:COUNT[=INIT], TYPE:VALUE or "
      "local:BYTES (TYPE: int, uint, long, ulong, float, double)",
      spec));
}

std::vector<std::byte> fill(const BufferArg& b) {
  std::vector<std::byte> out(b.count * b.type->size);
  for (uint64_t i = 0; i < b.count; ++i) {
    const double v = b.a * static_cast<double>(i) + b.b;
    std::byte* p = out.data() + i * b.type->size;
    switch (b.type->type) {
      case ScalarType::kI32: {
        int32_t x = static_cast<int32_t>(v);
        std::memcpy(p, &x, 4);
        break;
      }
      case ScalarType::kU32: {
        uint32_t x = static_cast<uint32_t>(v);
        std::memcpy(p, &x, 4);
        break;
      }
      case ScalarType::kI64: {
        int64_t x = static_cast<int64_t>(v);
        std::memcpy(p, &x, 8);
        break;
      }
      case ScalarType::kU64: {
        uint64_t x = static_cast<uint64_t>(v);
        std::memcpy(p, &x, 8);
        break;
      }
      case ScalarType::kF32: {
        float x = static_cast<float>(v);
        std::memcpy(p, &x, 4);
        break;
      }
      case ScalarType::kF64: {
        std::memcpy(p, &v, 8);
        break;
      }
      default:
        break;
    }
  }
  return out;
}

double element(const BufferArg& b, const std::vector<std::byte>& data, uint64_t i) {
  const std::byte* p = data.data() + i * b.type->size;
  switch (b.type->type) {
    case ScalarType::kI32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case ScalarType::kU32: {
      uint32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case ScalarType::kI64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case ScalarType::kU64: {
      uint64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case ScalarType::kF32: {
      float x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case ScalarType::kF64: {
      double x;
      std::memcpy(&x, p, 8);
      return x;
    }
    default:
      return 0;
  }
}

absl::StatusOr<Dims> parse_dims(const std::string& text) {
  Dims d;
  if (text.empty()) return d;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    if (d.rank == kad::client::kMaxRank) return absl::InvalidArgumentError("too many dimensions");
    try {
      d.v[static_cast<size_t>(d.rank++)] = std::stoll(std::string(part));
    } catch (const std::exception&) {
      return absl::InvalidArgumentError(absl::StrFormat("`%s` is not a list of sizes", text));
    }
  }
  return d;
}

std::string dims_text(const Dims& d) {
  std::vector<int64_t> v(d.v.begin(), d.v.begin() + d.rank);
  return "(" + absl::StrJoin(v, ", ") + ")";
}

struct RunOptions {
  std::string file, entry, ndrange, workgroup, device, build_options;
  std::vector<std::string> args;
  int show = 8;
};

int cmd_run(kad::Client& client, const RunOptions& o, bool json) {
  std::ifstream in(o.file);
  if (!in) return fail(absl::NotFoundError("cannot read " + o.file));
  std::stringstream source;
  source << in.rdbuf();

  auto ndrange = parse_dims(o.ndrange);
  if (!ndrange.ok()) return fail(ndrange.status());
  auto workgroup = parse_dims(o.workgroup);
  if (!workgroup.ok()) return fail(workgroup.status());
  std::vector<RunArg> args;
  kad::client::KernelSpec spec{o.entry,      std::nullopt, std::nullopt,
                               std::nullopt, {},           o.build_options};
  for (const std::string& a : o.args) {
    auto parsed = parse_arg(a);
    if (!parsed.ok()) return fail(parsed.status());
    args.push_back(*parsed);
    if (auto* b = std::get_if<BufferArg>(&args.back())) {
      spec.args.push_back(b->is_const ? ArgSpec::const_buffer() : ArgSpec::buffer());
    } else {
      const Arg& x = std::get<Arg>(args.back());
      spec.args.push_back(x.kind() == Arg::Kind::kLocal ? ArgSpec::local()
                                                        : ArgSpec::scalar_of(x.scalar_type()));
    }
  }

  auto queue = client.create_queue(o.device);
  if (!queue.ok()) return fail(queue.status());
  std::vector<Arg> launch_args;
  for (RunArg& a : args) {
    if (auto* b = std::get_if<BufferArg>(&a)) {
      auto buffer = client.allocate(std::max<uint64_t>(b->count * b->type->size, 1), o.device);
      if (!buffer.ok()) return fail(buffer.status());
      b->buffer = *buffer;
      const std::vector<std::byte> init = fill(*b);
      if (auto s = (*queue)->write(b->buffer, 0, init); !s.ok()) return fail(s);
      launch_args.push_back(Arg::buffer(b->buffer));
    } else {
      launch_args.push_back(std::get<Arg>(a));
    }
  }
  auto module = client.load_module(source.str());
  if (!module.ok()) return fail(module.status());
  auto kernel = client.get_kernel(*module, spec);
  if (!kernel.ok()) return fail(kernel.status());

  const auto start = std::chrono::steady_clock::now();
  // launch + wait in one round trip to kad
  auto launched =
      (*queue)->run(*kernel, &*ndrange, workgroup->rank ? &*workgroup : nullptr, launch_args);
  if (!launched.ok()) return fail(launched.status());
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  std::vector<std::string> json_buffers;
  if (!json) {
    absl::PrintF("kernel     %s from %s\n", o.entry.c_str(), o.file.c_str());
    absl::PrintF(
        "launch     ndrange %s, workgroup %s, %s, %d-bit indices; %.3f ms (launch + wait)\n",
        dims_text(*ndrange).c_str(), dims_text(launched->workgroup).c_str(),
        launched->linear ? "linear" : "N-d grid", launched->index_bits, ms);
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const auto* b = std::get_if<BufferArg>(&args[i]);
    if (b == nullptr) continue;
    std::vector<std::byte> data(b->count * b->type->size);
    if (auto s = (*queue)->read(b->buffer, 0, data); !s.ok()) return fail(s);
    double sum = 0;
    std::vector<std::string> shown;
    for (uint64_t k = 0; k < b->count; ++k) {
      const double v = element(*b, data, k);
      sum += v;
      if (k < static_cast<uint64_t>(o.show)) shown.push_back(absl::StrFormat("%g", v));
    }
    if (b->count > static_cast<uint64_t>(o.show)) shown.push_back("...");
    if (json) {
      json_buffers.push_back(absl::StrFormat(
          R"({"arg":%d,"type":"%s","count":%d,"sum":%.17g,"first":[%s]})", i, b->type->name,
          b->count, sum,
          absl::StrJoin(
              std::vector<std::string>(
                  shown.begin(), shown.end() - (b->count > static_cast<uint64_t>(o.show) ? 1 : 0)),
              ",")));
    } else {
      absl::PrintF("arg %-3zu    %s[%llu]  sum %.10g  [%s]\n", i, b->type->name,
                   static_cast<unsigned long long>(b->count), sum,
                   absl::StrJoin(shown, " ").c_str());
    }
  }
  if (json) {
    absl::PrintF(
        R"({"kernel":"%s","ndrange":[%s],"workgroup":[%s],"linear":%s,"index_bits":%d,"ms":%.6f,"buffers":[%s]})"
        "\n",
        json_escape(o.entry),
        absl::StrJoin(std::vector<int64_t>(ndrange->v.begin(), ndrange->v.begin() + ndrange->rank),
                      ","),
        absl::StrJoin(
            std::vector<int64_t>(launched->workgroup.v.begin(),
                                 launched->workgroup.v.begin() + launched->workgroup.rank),
            ","),
        launched->linear ? "true" : "false", launched->index_bits, ms,
        absl::StrJoin(json_buffers, ","));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kactl — talk to the kad device launch service"};
  app.require_subcommand(1);
  std::string address;
  bool json = false;
  app.add_option("--connect", address,
                 "unix:PATH, tcp://HOST:PORT, tls://HOST:PORT (default $KAD_ADDRESS, then " +
                     default_address() + ")");
  app.add_flag("--json", json, "machine-readable output");
  kad::client::ConnectOptions connect_options;
  app.add_option("--token", connect_options.token,
                 "bearer token for a kad that asks TCP clients for one (default $KAD_TOKEN, then "
                 "the file $KAD_TOKEN_FILE)");
  app.add_option("--tls-ca", connect_options.tls_ca_file,
                 "tls://: PEM CA that signed kad's certificate (default $KAD_TLS_CA, then the "
                 "system's)");
  app.add_option("--tls-cert", connect_options.tls_cert_file,
                 "tls://: this client's PEM certificate, for a kad that asks (default "
                 "$KAD_TLS_CERT)");
  app.add_option("--tls-key", connect_options.tls_key_file,
                 "tls://: the key of --tls-cert (default $KAD_TLS_KEY)");
  CLI::App* devices = app.add_subcommand("devices", "list the daemon's devices");
  CLI::App* status = app.add_subcommand("status", "the daemon's counters");
  CLI::App* run = app.add_subcommand("run", "run a kernel file and summarise its buffers");
  CLI::App* health = app.add_subcommand(
      "health", "whether kad serves (grpc.health.v1; exit 0 if so): a probe's check, no session");
  double health_timeout_s = 5;
  health->add_option("--timeout", health_timeout_s, "seconds to wait for kad's answer (default 5)");
  RunOptions ro;
  run->add_option("file", ro.file, "OpenCL C source using the kad prelude")->required();
  run->add_option("--entry", ro.entry, "kernel function")->required();
  run->add_option("--ndrange", ro.ndrange, "extents, comma-separated (e.g. 1024 or 64,64)")
      ->required();
  run->add_option("--workgroup", ro.workgroup, "workgroup size (default: tuned)");
  run->add_option("--device", ro.device, "device id (default: the daemon's default)");
  run->add_option("--build-options", ro.build_options, "compiler options for this kernel");
  run->add_option("--arg", ro.args,
                  "in order: buf:TYPE:COUNT[=a*i+b], cbuf:... (const), TYPE:VALUE, local:BYTES");
  run->add_option("--show", ro.show, "elements of each buffer to print");
  CLI11_PARSE(app, argc, argv);

  if (address.empty()) address = default_address();
  if (*health) {
    const absl::Status serving =
        kad::Client::check_health(address, connect_options, absl::Seconds(health_timeout_s));
    if (json) {
      std::printf("{\"serving\":%s,\"message\":\"%s\"}\n", serving.ok() ? "true" : "false",
                  json_escape(std::string(serving.message())).c_str());
      return serving.ok() ? 0 : 1;
    }
    if (!serving.ok()) return fail(serving);
    std::printf("kad at %s serves\n", address.c_str());
    return 0;
  }
  auto client = kad::Client::connect(address, "kactl", connect_options);
  if (!client.ok()) return fail(client.status());
  if (*devices) return cmd_devices(**client, json);
  if (*status) return cmd_status(**client, json);
  if (*run) return cmd_run(**client, ro, json);
  return 2;
}
