// A kernel's build options are client input (DESIGN §8): they reach clang
// and the drivers' own compilers, where `-I`, `@file`, `-include` or
// `-Xclang -load` would read host files or load code, and where a malformed
// option (a bare `-D`) has crashed a driver. So they are parsed and checked
// against an allow-list before any compiler sees them.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kad {

// The most bytes of build options a kernel may carry.
inline constexpr size_t kMaxBuildOptionsBytes = 4096;

// Parses `options` (whitespace-separated; no quoting) and returns them in one
// canonical spelling — `-DNAME`, `-DNAME=VALUE`, the flags as given, separated
// by one space — or INVALID_ARGUMENT naming the first option that is
// malformed or not allowed. Allowed (OpenCL 1.2 §5.6.4, what every driver
// takes): -D NAME[=VALUE] (also joined: -DNAME), where NAME is a C identifier
// that does not start with `__` or `KAD_` / `kad_` (the prelude's) and VALUE
// has only letters, digits and `_ . + -`; -w and -Werror; the optimisation
// options.
absl::StatusOr<std::string> checked_build_options(absl::string_view kernel,
                                                  absl::string_view options);

}  // namespace kad
