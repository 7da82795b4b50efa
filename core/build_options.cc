#include "core/build_options.h"

#include <array>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kad {
namespace {

// Options that take no value and only change how code is optimised or warned
// about (OpenCL 1.2 §5.6.4, and clang's -w / -Werror).
constexpr std::array<absl::string_view, 11> kFlags = {
    "-w",
    "-Werror",
    "-cl-opt-disable",
    "-cl-mad-enable",
    "-cl-no-signed-zeros",
    "-cl-unsafe-math-optimizations",
    "-cl-finite-math-only",
    "-cl-fast-relaxed-math",
    "-cl-denorms-are-zero",
    "-cl-single-precision-constant",
    "-cl-fp32-correctly-rounded-divide-sqrt",
};

bool is_identifier(absl::string_view s) {
  if (s.empty() || absl::ascii_isdigit(static_cast<unsigned char>(s[0]))) return false;
  return absl::c_all_of(
      s, [](char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

bool is_reserved(absl::string_view name) {
  return absl::StartsWith(name, "__") || absl::StartsWith(name, "KAD_") ||
         absl::StartsWith(name, "kad_");
}

bool is_plain_value(absl::string_view s) {
  return absl::c_all_of(s, [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '+' ||
           c == '-';
  });
}

// "NAME" or "NAME=VALUE" after -D: the canonical option.
absl::StatusOr<std::string> macro_option(absl::string_view kernel, absl::string_view text) {
  const size_t eq = text.find('=');
  const absl::string_view name = text.substr(0, eq);
  if (!is_identifier(name)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s`: build option `-D%s` does not name a macro (a C identifier)", kernel, text));
  }
  if (is_reserved(name)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s`: build option `-D%s` names macro `%s`, which is reserved for kad's prelude "
        "and the compiler (names starting with `__`, `KAD_` or `kad_`)",
        kernel, text, name));
  }
  if (eq != absl::string_view::npos) {
    const absl::string_view value = text.substr(eq + 1);
    if (!is_plain_value(value)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "kernel `%s`: build option `-D%s`: the value `%s` may hold only letters, digits and "
          "`_ . + -`",
          kernel, text, value));
    }
  }
  return absl::StrCat("-D", text);
}

}  // namespace

absl::StatusOr<std::string> checked_build_options(absl::string_view kernel,
                                                  absl::string_view options) {
  if (options.size() > kMaxBuildOptionsBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("kernel `%s`: build options of %d bytes exceed the maximum of %d", kernel,
                        options.size(), kMaxBuildOptionsBytes));
  }
  const std::vector<absl::string_view> words =
      absl::StrSplit(options, absl::ByAnyChar(" \t\n\r\f\v"), absl::SkipEmpty());
  std::vector<std::string> canonical;
  for (size_t i = 0; i < words.size(); ++i) {
    const absl::string_view word = words[i];
    if (absl::c_linear_search(kFlags, word)) {
      canonical.emplace_back(word);
      continue;
    }
    if (word == "-D") {
      if (i + 1 == words.size()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "kernel `%s`: build option `%s` has no macro name after it", kernel, word));
      }
      absl::StatusOr<std::string> macro = macro_option(kernel, words[++i]);
      if (!macro.ok()) return macro.status();
      canonical.push_back(*std::move(macro));
      continue;
    }
    if (absl::StartsWith(word, "-D")) {
      absl::StatusOr<std::string> macro = macro_option(kernel, word.substr(2));
      if (!macro.ok()) return macro.status();
      canonical.push_back(*std::move(macro));
      continue;
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s`: build option `%s` is not allowed (allowed: -D NAME[=VALUE], -w, -Werror, "
        "%s)",
        kernel, word, absl::StrJoin(kFlags.begin() + 2, kFlags.end(), ", ")));
  }
  return absl::StrJoin(canonical, " ");
}

}  // namespace kad
