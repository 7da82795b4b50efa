// kad's state in Prometheus' text exposition format (version 0.0.4), for
// `--metrics` (server/metrics_server.h). Labels name only what kad or its
// operator chose — device ids, tenant names, quota keys, methods, status
// codes — never a session id or anything a client chose, so the number of
// series is bounded.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "server/engine.h"
#include "server/request_counters.h"

namespace kad::server {

std::string prometheus_text(const EngineCounters& counters, const RequestCounters& requests);

// `value` as a label value: backslash, double quote and newline escaped.
std::string prometheus_label_value(absl::string_view value);

}  // namespace kad::server
