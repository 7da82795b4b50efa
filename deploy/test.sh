#!/usr/bin/env bash
# Installs what kad needs (Debian 12 packages), builds everything and runs the
# whole test suite with CTest. The README's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
cmake -S . -B build -G Ninja -DKAD_WERROR=ON
cmake --build build -j2
ctest --test-dir build -j2 --output-on-failure
