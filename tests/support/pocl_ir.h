// The code PoCL generated, read back as LLVM IR: for tests that check what a
// specialisation compiled to (no bounds check where static sizes divide).
#pragma once

#include <string>

namespace kad::testing {

// Runs a shell command; its standard output.
std::string run_command(const std::string& command);

// The body of kernel `entry` as PoCL compiled it: PoCL keeps each program's
// bitcode (program.bc) in its kernel cache `pocl_cache`, next to one folder
// per kernel it has run; `llvm_dis` turns it into text. Empty when not found.
std::string pocl_kernel_ir(const std::string& llvm_dis, const std::string& pocl_cache,
                           const std::string& entry);

// How often `what` occurs in `text`.
int count_of(const std::string& text, const std::string& what);

}  // namespace kad::testing
