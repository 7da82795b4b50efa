#!/usr/bin/env bash
# Installs libkad_client from BUILD_DIR into a temporary prefix, builds the
# example program against it three times (CMake package with the shared and
# the static runtime, pkg-config), and runs them against a real kad.
# Usage: check_install.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
tmp=$(mktemp -d /tmp/kad-install-XXXXXX)
kad_pid=
trap 'kill $kad_pid 2>/dev/null || true; rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" --component client >/dev/null
cmake --install "$build" --prefix "$tmp/prefix" --component runtime >/dev/null

# The kernel prelude is installed with the headers, and a kernel builds
# against it in its linked form, as an IR module (where clang-15 exists).
prelude="$tmp/prefix/include/kad/kad_prelude.cl"
[ -f "$prelude" ] || { echo "kad_prelude.cl was not installed under include/kad" >&2; exit 1; }
clang=/usr/lib/llvm-15/bin/clang
if [ -x "$clang" ]; then
  printf 'kernel void scale(KAD_CONTEXT, global float* x, float a) {\n  if (kad_active()) x[kad_global_linear()] *= a;\n}\n' >"$tmp/scale.cl"
  "$clang" -x cl -cl-std=CL1.2 -target spir64 -Xclang -finclude-default-header \
    -Xclang -disable-llvm-passes -DKAD_LINKED_SPECIALIZATION -I "$tmp/prefix/include" \
    -include kad/kad_prelude.cl -emit-llvm -c "$tmp/scale.cl" -o "$tmp/scale.bc"
  [ -s "$tmp/scale.bc" ] || { echo "no bitcode built against the installed prelude" >&2; exit 1; }
fi

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
"$tmp/example/kad_example_static" "unix:$tmp/kad.sock"
# The shared build loads gRPC's shared objects; the static one and the
# installed kactl none of gRPC's, protobuf's or abseil's.
readelf -d "$tmp/example/kad_example" | grep -q "libgrpc++" ||
  { echo "kad_example does not link libgrpc++.so: the shared build is not what it says" >&2; exit 1; }
for program in "$tmp/example/kad_example_static" "$tmp/prefix/bin/kactl"; do
  readelf -d "$program" > "$tmp/dynamic"
  if grep -E "NEEDED.*lib(grpc|gpr|upb|protobuf|absl_)" "$tmp/dynamic"; then
    echo "$program loads the shared objects above: KAD_STATIC_RUNTIME did not take" >&2
    exit 1
  fi
done
"$tmp/example_pc" "unix:$tmp/kad.sock"
"$tmp/prefix/bin/kactl" --connect "unix:$tmp/kad.sock" devices
