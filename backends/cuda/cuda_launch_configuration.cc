#include "backends/cuda/cuda_launch_configuration.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kad::cuda {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

bool is_identifier_char(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}

}  // namespace

uint64_t occupancy_threads(uint64_t nitems, uint64_t max_items, int block, int min_grid,
                           bool prefer_blocks) {
  const uint64_t limit = std::max<uint64_t>(1, std::min(nitems, max_items));
  uint64_t threads = std::clamp<uint64_t>(block > 0 ? static_cast<uint64_t>(block) : 1, 1, limit);
  if (prefer_blocks && nitems > 0) {
    const uint64_t blocks =
        std::max<uint64_t>(ceil_div(nitems, threads), min_grid > 0 ? min_grid : 1);
    threads = std::clamp<uint64_t>(ceil_div(nitems, blocks), 1, limit);
  }
  return threads;
}

absl::StatusOr<std::string> ptx_target_for(int major, int minor) {
  // What LLVM 15 emits code for (llc -march=nvptx64 -mcpu=help), oldest first.
  static constexpr int kTargets[] = {35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80};
  const int device = major * 10 + minor;
  int chosen = 0;
  for (int t : kTargets)
    if (t <= device) chosen = t;
  if (chosen == 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "compute capability %d.%d is older than the oldest PTX target kad emits (sm_35)", major,
        minor));
  }
  return absl::StrCat("sm_", chosen);
}

namespace {

// Where the `.entry` of `entry` keeps its parameter list: the positions of
// its `(`, its `)` and the body's `{`.
struct EntryHeader {
  size_t open, close, body;
};

absl::StatusOr<EntryHeader> find_entry(absl::string_view ptx, absl::string_view entry) {
  // `.entry NAME(` or `.entry NAME (`; NAME must end where an identifier ends.
  size_t at = 0;
  for (;;) {
    at = ptx.find(".entry", at);
    if (at == absl::string_view::npos) {
      return absl::NotFoundError(absl::StrFormat("PTX has no .entry `%s`", entry));
    }
    size_t name = at + 6;
    while (name < ptx.size() && absl::ascii_isspace(static_cast<unsigned char>(ptx[name]))) ++name;
    if (ptx.substr(name, entry.size()) == entry &&
        (name + entry.size() == ptx.size() || !is_identifier_char(ptx[name + entry.size()]))) {
      at = name + entry.size();
      break;
    }
    at = name;
  }
  const size_t open = ptx.find('(', at);
  const size_t close = open == absl::string_view::npos ? open : ptx.find(')', open);
  const size_t body = close == absl::string_view::npos ? close : ptx.find('{', close);
  if (body == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrFormat("PTX .entry `%s` has no parameter list and body", entry));
  }
  return EntryHeader{open, close, body};
}

}  // namespace

absl::StatusOr<size_t> ptx_parameter_count(absl::string_view ptx, absl::string_view entry) {
  absl::StatusOr<EntryHeader> header = find_entry(ptx, entry);
  if (!header.ok()) return header.status();
  const absl::string_view list = ptx.substr(header->open + 1, header->close - header->open - 1);
  size_t count = 0;
  for (size_t at = list.find(".param"); at != absl::string_view::npos;
       at = list.find(".param", at + 6)) {
    ++count;
  }
  return count;
}

absl::StatusOr<std::string> with_max_threads(absl::string_view ptx, absl::string_view entry,
                                             const std::array<uint64_t, 3>& threads) {
  absl::StatusOr<EntryHeader> header = find_entry(ptx, entry);
  if (!header.ok()) return header.status();
  const size_t close = header->close, body = header->body;
  if (ptx.substr(close, body - close).find(".maxntid") != absl::string_view::npos) {
    return std::string(ptx);  // already bounded by its author
  }
  return absl::StrCat(ptx.substr(0, close + 1),
                      absl::StrFormat("\n.maxntid %d, %d, %d", threads[0], threads[1], threads[2]),
                      ptx.substr(close + 1));
}

absl::StatusOr<std::string> with_dynamic_local(absl::string_view ptx, absl::string_view entry,
                                               std::span<const int> local_params) {
  constexpr absl::string_view kWindow = "__kad_dynamic_local";
  constexpr absl::string_view kBase = "%kad_local_base";
  // The entry's body: from its `{` to the `}` that closes it (a body's
  // nested braces are balanced).
  const std::string header = absl::StrCat(".entry ", entry, "(");
  size_t at = ptx.find(header);
  if (at == absl::string_view::npos) at = ptx.find(absl::StrCat(".entry ", entry, " ("));
  if (at == absl::string_view::npos) {
    return absl::NotFoundError(absl::StrFormat("PTX has no .entry `%s`", entry));
  }
  const size_t open = ptx.find('{', at);
  if (open == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrFormat("PTX .entry `%s` has no body", entry));
  }
  size_t close = open;
  for (int depth = 0; close < ptx.size(); ++close) {
    if (ptx[close] == '{') ++depth;
    if (ptx[close] == '}' && --depth == 0) break;
  }
  if (close >= ptx.size()) {
    return absl::InvalidArgumentError(absl::StrFormat("PTX .entry `%s` is not closed", entry));
  }
  std::string body(ptx.substr(open + 1, close - open - 1));
  for (int param : local_params) {
    const std::string operand = absl::StrFormat("[%s_param_%d]", entry, param);
    size_t found = 0, loads = 0;
    while ((found = body.find(operand, found)) != std::string::npos) {
      // `ld.param.u64 %rdN, [entry_param_K];`: offset the register by the base.
      const size_t line = body.rfind('\n', found) + 1;
      const size_t end = body.find(';', found);
      const absl::string_view load = absl::string_view(body).substr(line, end - line);
      const size_t reg = load.find('%');
      const size_t comma = load.find(',', reg);
      if (load.find("ld.param") == absl::string_view::npos || reg == absl::string_view::npos ||
          comma == absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "PTX .entry `%s` uses local-memory parameter %d other than by ld.param: %s", entry,
            param, load));
      }
      const std::string target(load.substr(reg, comma - reg));
      const std::string offset =
          absl::StrFormat("\n\tadd.u64 \t%s, %s, %s;", target, target, kBase);
      body.insert(end + 1, offset);
      found = end + 1 + offset.size();
      ++loads;
    }
    if (loads == 0) continue;  // an unused parameter
  }
  const size_t line = ptx.rfind('\n', at) + 1;  // before `.visible .entry`
  return absl::StrCat(
      ptx.substr(0, line), ".extern .shared .align ", kLocalAlignment, " .b8 ", kWindow, "[];\n",
      ptx.substr(line, open + 1 - line),
      absl::StrFormat("\n\t.reg .u64 \t%s;\n\tmov.u64 \t%s, %s;", kBase, kBase, kWindow), body,
      ptx.substr(close));
}

}  // namespace kad::cuda
