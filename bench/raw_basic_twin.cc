#include "bench/raw_basic_twin.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <cstdio>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/support/daemon.h"

namespace kad_bench {

namespace {

// Google Benchmark's time units, in seconds.
double unit_seconds(const std::string& unit) {
  if (unit == "ns") return 1e-9;
  if (unit == "us") return 1e-6;
  if (unit == "ms") return 1e-3;
  return 1;
}

}  // namespace

absl::StatusOr<TwinResult> run_raw_case_on_basic(const std::string& self,
                                                 const std::string& raw_case,
                                                 const std::string& min_time_flag) {
  const std::string stem = absl::StrFormat("/tmp/kad-bench-raw-basic-%d", getpid());
  const std::string json_path = stem + ".json", log_path = stem + ".log";
  // The case's exact name, every character that means something to a
  // regex escaped (a case such as `workgroup=(1024,)` has parentheses).
  std::string exact;
  for (const char c : raw_case) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) exact += '\\';
    exact += c;
  }
  std::vector<std::string> argv = {"/usr/bin/env",
                                   "POCL_DEVICES=basic",
                                   self,
                                   absl::StrCat("--benchmark_filter=^raw/", exact, "/real_time$"),
                                   "--benchmark_out=" + json_path,
                                   "--benchmark_out_format=json"};
  if (!min_time_flag.empty()) argv.push_back(min_time_flag);
  const int exit_code = kad::testing::wait_exit(kad::testing::spawn(argv, log_path));
  const std::string json = kad::testing::read_file(json_path);
  std::remove(json_path.c_str());
  if (exit_code != 0 || json.empty()) {
    return absl::InternalError(
        absl::StrFormat("raw/%s on PoCL's basic: the child kad_bench exited %d; its log: %s",
                        raw_case, exit_code, log_path));
  }
  google::protobuf::Struct results;
  if (!google::protobuf::util::JsonStringToMessage(json, &results).ok()) {
    return absl::InternalError(absl::StrFormat(
        "raw/%s on PoCL's basic: the child's results do not parse as JSON", raw_case));
  }
  const auto& benchmarks = results.fields().find("benchmarks");
  if (benchmarks == results.fields().end() || benchmarks->second.list_value().values_size() != 1) {
    return absl::InternalError(absl::StrFormat(
        "raw/%s on PoCL's basic: the child ran no such case; its log: %s", raw_case, log_path));
  }
  const auto& fields = benchmarks->second.list_value().values(0).struct_value().fields();
  const auto number = [&](const char* key) {
    const auto f = fields.find(key);
    return f == fields.end() ? 0.0 : f->second.number_value();
  };
  const auto error = fields.find("error_occurred");
  if (error != fields.end() && error->second.bool_value()) {
    const auto message = fields.find("error_message");
    return absl::InternalError(absl::StrFormat(
        "raw/%s on PoCL's basic: %s", raw_case,
        message == fields.end() ? std::string("failed") : message->second.string_value()));
  }
  const auto unit = fields.find("time_unit");
  TwinResult out;
  out.seconds_per_iteration =
      number("real_time") * unit_seconds(unit == fields.end() ? "ns" : unit->second.string_value());
  out.items_per_second = number("items_per_second");
  if (const auto context = results.fields().find("context"); context != results.fields().end()) {
    const auto& c = context->second.struct_value().fields();
    if (const auto name = c.find("kad_device_name"); name != c.end())
      out.device_name = name->second.string_value();
  }
  std::remove(log_path.c_str());
  return out;
}

}  // namespace kad_bench
