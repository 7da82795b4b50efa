#include "core/ir_checks.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kad {
namespace {

constexpr std::array<absl::string_view, 4> kRequired = {
    "kernel_arg_addr_space", "kernel_arg_access_qual", "kernel_arg_type", "kernel_arg_type_qual"};
constexpr std::array<absl::string_view, 2> kOptional = {"kernel_arg_base_type", "kernel_arg_name"};

// Splits `text` at commas outside brackets and quoted strings. Returns false
// when the brackets or quotes do not balance.
bool split_top_level(absl::string_view text, std::vector<absl::string_view>* parts) {
  parts->clear();
  int depth = 0;
  bool quoted = false;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') quoted = false;
      continue;
    }
    switch (c) {
      case '"':
        quoted = true;
        break;
      case '(':
      case '[':
      case '{':
      case '<':
        ++depth;
        break;
      case ')':
      case ']':
      case '}':
      case '>':
        if (--depth < 0) return false;
        break;
      case ',':
        if (depth == 0) {
          parts->push_back(absl::StripAsciiWhitespace(text.substr(start, i - start)));
          start = i + 1;
        }
        break;
      default:
        break;
    }
  }
  if (depth != 0 || quoted) return false;
  const absl::string_view last = absl::StripAsciiWhitespace(text.substr(start));
  if (!last.empty() || !parts->empty()) parts->push_back(last);
  return true;
}

// The text between the bracket at `open` and its partner; npos when unbalanced.
size_t matching_close(absl::string_view text, size_t open) {
  int depth = 0;
  bool quoted = false;
  for (size_t i = open; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') quoted = false;
    } else if (c == '"') {
      quoted = true;
    } else if (c == '(' || c == '{') {
      ++depth;
    } else if (c == ')' || c == '}') {
      if (--depth == 0) return i;
    }
  }
  return absl::string_view::npos;
}

// `!12 = !{...}` and `!12 = distinct !{...}`: node number to operand text.
absl::flat_hash_map<std::string, absl::string_view> metadata_nodes(absl::string_view ir) {
  absl::flat_hash_map<std::string, absl::string_view> nodes;
  for (absl::string_view line : absl::StrSplit(ir, '\n')) {
    if (!absl::StartsWith(line, "!")) continue;
    const size_t eq = line.find(" = ");
    if (eq == absl::string_view::npos) continue;
    const absl::string_view name = line.substr(0, eq);
    absl::string_view body = line.substr(eq + 3);
    absl::ConsumePrefix(&body, "distinct ");
    if (!absl::ConsumePrefix(&body, "!{") || !absl::ConsumeSuffix(&body, "}")) continue;
    nodes[std::string(name)] = body;
  }
  return nodes;
}

absl::Status check_kernel(absl::string_view what, absl::string_view define,
                          const absl::flat_hash_map<std::string, absl::string_view>& nodes) {
  const size_t at = define.find(" @");
  const size_t open = define.find('(', at == absl::string_view::npos ? 0 : at);
  if (at == absl::string_view::npos || open == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s module: a kernel definition kad cannot read: `%s`", what, define.substr(0, 200)));
  }
  const std::string name(define.substr(at + 2, open - at - 2));
  const size_t close = matching_close(define, open);
  std::vector<absl::string_view> params;
  if (close == absl::string_view::npos ||
      !split_top_level(define.substr(open + 1, close - open - 1), &params)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s module: kernel `%s` has a parameter list kad cannot read", what, name));
  }
  // Attachments follow the parameter list: `!kernel_arg_type !5`.
  const absl::string_view attachments = define.substr(close + 1);
  auto attached = [&](absl::string_view kind) -> std::optional<absl::string_view> {
    const std::string needle = absl::StrCat("!", kind, " ");
    const size_t pos = attachments.find(needle);
    if (pos == absl::string_view::npos) return std::nullopt;
    absl::string_view ref = attachments.substr(pos + needle.size());
    ref = ref.substr(0, ref.find_first_of(" {"));
    return ref;
  };
  auto check = [&](absl::string_view kind, bool required) -> absl::Status {
    const std::optional<absl::string_view> ref = attached(kind);
    if (!ref) {
      if (!required) return absl::OkStatus();
      return absl::InvalidArgumentError(
          absl::StrFormat("%s module: kernel `%s` has no !%s metadata, which OpenCL drivers need",
                          what, name, kind));
    }
    auto node = nodes.find(*ref);
    std::vector<absl::string_view> operands;
    if (node == nodes.end() || !split_top_level(node->second, &operands)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s module: kernel `%s`: its !%s metadata (%s) is missing or unreadable",
                          what, name, kind, *ref));
    }
    if (operands.size() != params.size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s module: kernel `%s` has %d parameters but its !%s metadata has %d entries", what,
          name, params.size(), kind, operands.size()));
    }
    for (size_t i = 0; i < operands.size(); ++i) {
      const absl::string_view op = operands[i];
      bool ok;
      if (kind == "kernel_arg_addr_space") {
        absl::string_view number = op;
        uint32_t space;
        ok = absl::ConsumePrefix(&number, "i32 ") && absl::SimpleAtoi(number, &space) && space <= 4;
      } else {
        ok = absl::StartsWith(op, "!\"") && absl::EndsWith(op, "\"") && op.size() >= 3;
      }
      if (!ok) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s module: kernel `%s`: entry %d of its !%s metadata is `%s`, not %s", what, name, i,
            kind, op, kind == "kernel_arg_addr_space" ? "an i32 address space (0-4)" : "a string"));
      }
    }
    return absl::OkStatus();
  };
  for (absl::string_view kind : kRequired) {
    if (absl::Status s = check(kind, true); !s.ok()) return s;
  }
  for (absl::string_view kind : kOptional) {
    if (absl::Status s = check(kind, false); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status check_kernel_metadata(absl::string_view what, absl::string_view llvm_ir) {
  const absl::flat_hash_map<std::string, absl::string_view> nodes = metadata_nodes(llvm_ir);
  for (absl::string_view line : absl::StrSplit(llvm_ir, '\n')) {
    if (absl::StartsWith(line, "!opencl.kernels")) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s module carries SPIR 1.2's !opencl.kernels list; kad takes kernels described by "
          "their own metadata, as clang 15 and llvm-spirv emit them",
          what));
    }
    if (absl::StartsWith(line, "define ") && absl::StrContains(line, " spir_kernel ")) {
      if (absl::Status s = check_kernel(what, line, nodes); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status check_no_inline_assembly(absl::string_view what, absl::string_view llvm_ir) {
  // In LLVM's text, an inline assembly value is `asm` after white space,
  // then its keywords, then the quoted code; a name (`%asm`, `@asm_x`) or a
  // string never looks like that.
  constexpr absl::string_view kKeywords[] = {" sideeffect", " alignstack", " inteldialect",
                                             " unwind"};
  int line = 1;
  for (size_t i = 0; i < llvm_ir.size(); ++i) {
    if (llvm_ir[i] == '\n') ++line;
    if (!absl::ascii_isspace(static_cast<unsigned char>(llvm_ir[i])) ||
        llvm_ir.substr(i + 1, 3) != "asm") {
      continue;
    }
    absl::string_view rest = llvm_ir.substr(i + 4);
    for (bool more = true; more;) {
      more = false;
      for (absl::string_view k : kKeywords) more |= absl::ConsumePrefix(&rest, k);
    }
    if (absl::StartsWith(rest, " \"")) {
      const bool module_level = i >= 6 && llvm_ir.substr(i - 6, 6) == "module";
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s module, line %d of its LLVM text: %s is not allowed: a kernel runs only the code "
          "its language lets it, never assembly of its own",
          what, line, module_level ? "module-level assembly" : "inline assembly"));
    }
  }
  return absl::OkStatus();
}

}  // namespace kad
