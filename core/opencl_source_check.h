// Checks a client's OpenCL C source before any compiler sees it (DESIGN §8):
// a compiler must see only the source it was given and the prelude. So the
// source may not name another file — no `#include`, `#include_next`,
// `#import` or `#embed` (with a literal path or one built by a macro),
// no `__has_include` or `__has_embed` probing, no `_Pragma` and no `#pragma`
// outside an allow-list (`#pragma GCC dependency` reads a file's time) —
// and may not use trigraphs (`??/` would splice lines past this check). Nor
// may it hold inline assembly (`asm`, `__asm`, `__asm__`): on a CPU device
// that is host code of the client's choosing (the lowered IR is checked too,
// for assembly that macros spell: check_no_inline_assembly).
//
// This is the first of two walls: the compilers also run in child processes
// that can read nothing of the host's but their own files (run_limited).
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kad {

// INVALID_ARGUMENT naming the line and what it uses, else OK.
absl::Status check_opencl_source(absl::string_view source);

}  // namespace kad
