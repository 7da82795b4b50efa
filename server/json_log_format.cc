#include "server/json_log_format.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "absl/time/time.h"

namespace kad::server {
namespace {

class JsonLogFormatter final : public spdlog::formatter {
 public:
  explicit JsonLogFormatter(std::string process) : process_(std::move(process)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const nlohmann::ordered_json line = {
        {"time",
         absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromChrono(msg.time), absl::UTCTimeZone())},
        {"level", std::string(spdlog::level::to_string_view(msg.level).data(),
                              spdlog::level::to_string_view(msg.level).size())},
        {"process", process_},
        {"pid", pid_},
        {"message", std::string(msg.payload.data(), msg.payload.size())},
    };
    const std::string text = line.dump(-1, ' ', /*ensure_ascii=*/false,
                                       nlohmann::ordered_json::error_handler_t::replace);
    dest.append(text.data(), text.data() + text.size());
    dest.push_back('\n');
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLogFormatter>(process_);
  }

 private:
  std::string process_;
  int pid_ = getpid();
};

}  // namespace

std::unique_ptr<spdlog::formatter> json_log_formatter(std::string process) {
  return std::make_unique<JsonLogFormatter>(std::move(process));
}

}  // namespace kad::server
