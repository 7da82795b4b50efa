#!/usr/bin/env bash
# Installs libkad_client from BUILD_DIR into a temporary prefix, builds the
# example program against it twice (CMake package, pkg-config), and runs both
# against a real kad. Usage: check_install.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
tmp=$(mktemp -d /tmp/kad-install-XXXXXX)
kad_pid=
trap 'kill $kad_pid 2>/dev/null || true; rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" --component client >/dev/null
cmake --install "$build" --prefix "$tmp/prefix" --component runtime >/dev/null

cmake -S "$src/tests/install/example" -B "$tmp/example" -G Ninja \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/example" >/dev/null
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" \
  c++ -std=c++20 -o "$tmp/example_pc" "$src/tests/install/example/main.cc" \
  $(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs kad)

"$tmp/prefix/bin/kad" --listen "unix:$tmp/kad.sock" --ready-file "$tmp/ready" >"$tmp/kad.log" 2>&1 &
kad_pid=$!
for _ in $(seq 300); do [ -f "$tmp/ready" ] && break; sleep 0.1; done
[ -f "$tmp/ready" ] || { cat "$tmp/kad.log"; exit 1; }

"$tmp/example/kad_example" "unix:$tmp/kad.sock"
"$tmp/example_pc" "unix:$tmp/kad.sock"
"$tmp/prefix/bin/kactl" --connect "unix:$tmp/kad.sock" devices
