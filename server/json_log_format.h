// kad's logs as JSON lines (--log-format json), for log collectors: one
// object per line with the time (UTC, RFC 3339 with milliseconds), the level,
// the process ("kad" or "kad worker"), its pid and the message. Messages
// carry client-chosen text (paths, kernel names): every byte is escaped, and
// bytes that are not UTF-8 become U+FFFD, so a line is always valid JSON.
#pragma once

#include <spdlog/formatter.h>

#include <memory>
#include <string>

namespace kad::server {

std::unique_ptr<spdlog::formatter> json_log_formatter(std::string process);

}  // namespace kad::server
