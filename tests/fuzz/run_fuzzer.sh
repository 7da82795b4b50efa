#!/usr/bin/env bash
# Builds the shared-memory record fuzzer with clang-15 and runs it for a
# bounded time. Usage: run_fuzzer.sh SOURCE_DIR BUILD_DIR [SECONDS]
# For a longer run while developing:  run_fuzzer.sh . build/fuzz 600
set -euo pipefail
src=$1
build=$2
seconds=${3:-10}
cmake -S "$src/tests/fuzz" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++-15 \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKAD_SOURCE_DIR="$src" >/dev/null
cmake --build "$build" >/dev/null
mkdir -p "$build/corpus"
"$build/kad_shm_record_fuzzer" -max_total_time="$seconds" -rss_limit_mb=1024 "$build/corpus" 2>&1 |
  tail -n 3
