#include "core/opencl_source_check.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"

namespace kad {
namespace {

constexpr char kWhy[] =
    "a kernel compiles from its own source and kad's prelude only, and may not reach any other "
    "file";

bool is_identifier_char(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// The source after translation phase 2 (line splices removed). Where each
// splice was is kept, so that an error can name the client's own line
// (computed only then: nothing per character).
struct Spliced {
  std::string text;
  std::vector<size_t> splices;  // offsets in `text` where a newline was spliced away

  int line_of(size_t offset) const {
    int line = 1;
    for (size_t i = 0; i < offset && i < text.size(); ++i) line += text[i] == '\n';
    for (size_t s : splices) line += s <= offset;
    return line;
  }
};

Spliced splice(absl::string_view source) {
  Spliced out;
  out.text.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    const char c = source[i];
    if (c == '\\') {
      size_t j = i + 1;
      while (j < source.size() && (source[j] == ' ' || source[j] == '\t')) ++j;  // clang allows it
      if (j < source.size() && source[j] == '\r') ++j;
      if (j < source.size() && source[j] == '\n') {
        out.splices.push_back(out.text.size());
        i = j;
        continue;
      }
    }
    out.text.push_back(c);
  }
  return out;
}

absl::Status refuse(int line, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrFormat("OpenCL C source line %d: %s is not allowed: %s", line, what, kWhy));
}

// Pragmas that change only how this source compiles.
bool allowed_pragma(absl::string_view first, absl::string_view second) {
  static const auto* const kAllowed = new absl::flat_hash_set<std::string>{
      "OPENCL", "unroll", "nounroll", "unroll_and_jam", "nounroll_and_jam", "STDC", "once"};
  if (kAllowed->contains(first)) return true;
  if (first == "clang") return second == "loop" || second == "fp" || second == "diagnostic";
  return false;
}

}  // namespace

absl::Status check_opencl_source(absl::string_view source) {
  // Phase 1 first: a trigraph is replaced before anything else is seen.
  for (size_t i = 0, line = 1; i + 2 < source.size(); ++i) {
    if (source[i] == '\n') ++line;
    if (source[i] == '?' && source[i + 1] == '?' &&
        absl::string_view("=/'()!<>-").find(source[i + 2]) != absl::string_view::npos) {
      return refuse(static_cast<int>(line),
                    absl::StrFormat("the trigraph `%s`", source.substr(i, 3)));
    }
  }
  const Spliced s = splice(source);
  const std::string& t = s.text;
  bool line_start = true;  // only whitespace (or comments) so far on this line
  size_t i = 0;
  auto skip_blanks = [&](size_t k) {
    for (;;) {
      while (k < t.size() && (t[k] == ' ' || t[k] == '\t' || t[k] == '\v' || t[k] == '\f')) ++k;
      if (k + 1 < t.size() && t[k] == '/' && t[k + 1] == '*') {
        const size_t end = t.find("*/", k + 2);
        k = end == std::string::npos ? t.size() : end + 2;
        continue;
      }
      return k;
    }
  };
  auto identifier_at = [&](size_t k) {
    size_t e = k;
    while (e < t.size() && is_identifier_char(t[e])) ++e;
    return absl::string_view(t).substr(k, e - k);
  };
  while (i < t.size()) {
    const char c = t[i];
    if (c == '\n') {
      line_start = true;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
      ++i;
      continue;
    }
    if (c == '/' && i + 1 < t.size() && t[i + 1] == '/') {
      while (i < t.size() && t[i] != '\n') ++i;
      continue;
    }
    if (c == '/' && i + 1 < t.size() && t[i + 1] == '*') {
      const size_t end = t.find("*/", i + 2);
      i = end == std::string::npos ? t.size() : end + 2;
      continue;
    }
    const bool hash = c == '#' || (c == '%' && i + 1 < t.size() && t[i + 1] == ':');
    if (hash && line_start) {
      const size_t at = i;  // its line is counted only for a refusal
      size_t k = skip_blanks(i + (c == '#' ? 1 : 2));
      const absl::string_view directive = identifier_at(k);
      if (directive == "include" || directive == "include_next" || directive == "import" ||
          directive == "embed") {
        return refuse(s.line_of(at), absl::StrFormat("`#%s`", directive));
      }
      if (directive == "pragma") {
        k = skip_blanks(k + directive.size());
        const absl::string_view first = identifier_at(k);
        k = skip_blanks(k + first.size());
        const absl::string_view second = identifier_at(k);
        if (!allowed_pragma(first, second)) {
          return refuse(s.line_of(at), absl::StrFormat("`#pragma %s%s%s`", first,
                                                       second.empty() ? "" : " ", second));
        }
      }
      line_start = false;
      i = k;
      continue;
    }
    line_start = false;
    if (c == '"' || c == '\'') {  // a literal: nothing in it is a directive or a name
      size_t k = i + 1;
      while (k < t.size() && t[k] != c && t[k] != '\n') k += t[k] == '\\' ? 2 : 1;
      i = k + 1;
      continue;
    }
    if (is_identifier_char(c)) {
      const absl::string_view name = identifier_at(i);
      if (name == "__has_include" || name == "__has_include_next" || name == "__has_embed" ||
          name == "_Pragma" || name == "__pragma") {
        return refuse(s.line_of(i), absl::StrFormat("`%s`", name));
      }
      if (name == "asm" || name == "__asm" || name == "__asm__") {
        return absl::InvalidArgumentError(absl::StrFormat(
            "OpenCL C source line %d: inline assembly (`%s`) is not allowed: a kernel runs only "
            "the code its language lets it, never assembly of its own",
            s.line_of(i), name));
      }
      i += name.size();
      continue;
    }
    ++i;
  }
  return absl::OkStatus();
}

}  // namespace kad
