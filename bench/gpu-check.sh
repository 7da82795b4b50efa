#!/usr/bin/env bash
# The CUDA backend on a GPU machine: conformance tests, the README's demo
# through a real kad, and the benchmark quick profile, on every CUDA device.
#
# A GPU machine has the NVIDIA driver but none of kad's Debian packages and no
# compiler of ours, so the check comes in two halves:
#
#   bench/gpu-check.sh prepare [BUNDLE]
#       On the build machine (Debian 12, as root: installs kad's packages).
#       Builds kad, runs the conformance tests, the demo and the benchmarks'
#       kad modes once on PoCL with KAD_PRELOWER=ptx:sm_80 so that every
#       kernel they compile is also lowered to PTX into BUNDLE/cache, lowers
#       the raw benchmark kernels too, and packs the binaries with the shared
#       libraries they need into BUNDLE (default out/gpu; at most 64 MiB).
#
#   bench/gpu-check.sh run [BUNDLE] [RESULTS]
#       On the GPU machine, from the repository root. For every CUDA device:
#       the CUDA backend's own tests, the conformance tests with
#       KAD_TEST_DEVICE=cuda:N, and the benchmark quick profile with
#       KAD_BENCH_DEVICE=cuda:N; once, kad-demo through a real kad over a
#       UNIX socket (the demo runs on the first GPU: kad's default device
#       where there is no CPU device; kad's log shows every backend's line). Logs and results.{json,md} go to RESULTS
#       (default $OUT when set, else out/gpu-results). Meant to finish within
#       8 minutes on one H200; each step has its own time limit.
#
# The kernels come from BUNDLE/cache: a kernel that was not lowered in
# `prepare` fails with "no PTX code for it in the cache ... and no toolchain".
set -uo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
bundle=${2:-out/gpu}

# The compiled-kernel cache tests of kad_opencl_tests; the conformance suite
# (kad_conformance_tests) runs whole, on the device KAD_TEST_DEVICE names.
cache_filter='KernelCacheOnPocl.*'

prepare() {
  set -e
  bash deploy/install-deps.sh
  cmake -S . -B build -G Ninja -DKAD_WERROR=ON >/dev/null
  cmake --build build -j"$(nproc)" --target kad kad-demo kad_opencl_tests \
    kad_conformance_tests kad_cuda_tests kad_bench
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/cache"
  local cache
  cache=$(cd "$bundle/cache" && pwd)

  echo "== lowering every kernel the GPU run compiles to PTX (sm_80) into $cache"
  export KAD_PRELOWER=ptx:sm_80 KAD_CACHE_DIR=$cache
  build/tests/conformance/kad_conformance_tests --gtest_brief=1
  build/tests/kad_opencl_tests --gtest_filter="$cache_filter" --gtest_brief=1
  deploy/run-kad-demo.sh build/server/kad build/client/kad-demo >/dev/null
  build/bench/kad_bench --prepare_gpu_cache
  # One short pass of every kad mode of the quick profile: what it compiles is lowered too.
  build/bench/kad_bench --profile=quick --benchmark_filter='^(inproc|shm|grpc-unix)/' \
    --benchmark_min_time=0.001 >/dev/null
  unset KAD_PRELOWER KAD_CACHE_DIR
  echo "   $(ls "$cache" | wc -l) kernels cached"

  echo "== packing binaries and libraries into $bundle"
  local binaries=(build/server/kad build/client/kad-demo
                  build/tests/kad_opencl_tests build/tests/conformance/kad_conformance_tests
                  build/tests/cuda/kad_cuda_tests
                  build/bench/kad_bench)
  for b in "${binaries[@]}"; do
    [ -x "$b" ] || { echo "missing $b" >&2; exit 1; }
    objcopy --strip-debug "$b" "$bundle/bin/$(basename "$b")"
  done
  # Every library the binaries load except the C runtime and the C++ runtime,
  # which the GPU machine's newer system has (binaries built against glibc
  # 2.36 run on newer ones).
  ldd "${binaries[@]}" | awk '/=> \// {print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
    while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
  strip --strip-unneeded "$bundle"/lib/*.so* 2>/dev/null || true
  du -sh "$bundle"
  local bytes
  bytes=$(du -sb "$bundle" | cut -f1)
  if [ "$bytes" -gt $((64 << 20)) ]; then
    echo "the bundle is $bytes bytes, over the 64 MiB a device run carries" >&2
    exit 1
  fi
  echo "ready: carry $bundle and run 'bash bench/gpu-check.sh run $bundle' on the GPU machine"
}

# Runs "$@" under a time limit, logging to $results/$name.log; notes the outcome.
step() {
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  echo "== $name (limit ${limit}s)"
  timeout --kill-after=10 "$limit" "$@" >"$results/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$results/$name.log"
  echo "-- $name: exit $rc after $((SECONDS - start)) s"
  echo "$name exit=$rc seconds=$((SECONDS - start))" >>"$results/summary.txt"
  [ "$rc" -eq 0 ] || failed=1
}

run() {
  results=${3:-${OUT:-out/gpu-results}}
  mkdir -p "$results"
  : >"$results/summary.txt"
  failed=0
  local bin
  bin=$(cd "$bundle/bin" && pwd)
  export LD_LIBRARY_PATH=$(cd "$bundle/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # A copy: the run may add entries, the bundle stays as prepared.
  export KAD_CACHE_DIR=/tmp/kad-gpu-check-cache
  rm -rf "$KAD_CACHE_DIR" && cp -r "$bundle/cache" "$KAD_CACHE_DIR"
  export CUDA_DEVICE_ORDER=PCI_BUS_ID
  {
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || true
    ldd --version | head -1
  } | tee "$results/machine.txt"
  local count
  count=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  [ "$count" -gt 0 ] || count=1

  step cuda_backend_tests 60 "$bin/kad_cuda_tests"
  step daemon_demo 60 deploy/run-kad-demo.sh "$bin/kad" "$bin/kad-demo"
  for ((i = 0; i < count; i++)); do
    step "conformance_cuda$i" 180 env KAD_TEST_DEVICE="cuda:$i" "$bin/kad_conformance_tests" \
      --gtest_brief=1
    step "kernel_cache_cuda$i" 120 env KAD_TEST_DEVICE="cuda:$i" "$bin/kad_opencl_tests" \
      --gtest_filter="$cache_filter" --gtest_brief=1
    step "bench_cuda$i" 300 env KAD_BENCH_DEVICE="cuda:$i" "$bin/kad_bench" --profile=quick \
      --benchmark_min_time=0.2 --benchmark_out="$results/results_cuda$i.json" \
      --benchmark_out_format=json
    if [ -s "$results/results_cuda$i.json" ]; then
      python3 bench/report.py "$results/results_cuda$i.json" "$results/results_cuda$i.md" \
        "$(head -2 "$results/machine.txt" | tr '\n' ';')" >>"$results/report.log" 2>&1 ||
        echo "report.py failed: see report.log"
    fi
  done
  echo "== summary"
  cat "$results/summary.txt"
  return "$failed"
}

case $mode in
  prepare) prepare ;;
  run) run "$@" ;;
  *)
    echo "usage: bench/gpu-check.sh prepare [BUNDLE] | run [BUNDLE] [RESULTS]" >&2
    exit 2
    ;;
esac
