#!/usr/bin/env bash
# Checks that every C++ file git tracks matches .clang-format (clang-format 15,
# the Debian 12 package deploy/install-deps.sh installs). Prints the files that
# differ and how to fix them; exits non-zero if any does.
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"
tool=$(command -v clang-format-15 || true)
if [ -z "$tool" ]; then
  echo "check_format: clang-format-15 not found (bash deploy/install-deps.sh installs it)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.cc' '*.h')
bad=()
for f in "${files[@]}"; do
  "$tool" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} of ${#files[@]} files differ from .clang-format:"
  printf '  %s\n' "${bad[@]}"
  echo "fix: git ls-files '*.cc' '*.h' | xargs $tool -i"
  exit 1
fi
echo "check_format: all ${#files[@]} C++ files match .clang-format"
