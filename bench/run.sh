#!/usr/bin/env bash
# Runs kad's benchmark suite side by side with the raw driver and writes
# DIR/results.json (Google Benchmark JSON) and DIR/results.md (each mode's
# ratio to raw/).
#   bench/run.sh [--quick|--full] [--out DIR] [--filter REGEX] [--min-time S]
#                [--device ID] [--no-install] [--build DIR] [--no-build]
# --quick (default): a few sizes, about three minutes on 2 cores; --full: all of them.
# --device ID: run every mode on kad device ID (cuda:0, opencl:pocl:0, ...;
#   sets KAD_BENCH_DEVICE); default: the registry's default device (PoCL).
# --no-install: install nothing (no deploy/install-deps.sh, no apt-get): for
#   machines without network; plots are skipped when matplotlib is missing.
# --build DIR: the CMake build folder (default: build). --no-build: run
#   DIR/bench/kad_bench as it is, without CMake (a binary built elsewhere).
# --netem: only the delayed-link cases (grpc-tcp-netem-1ms/), over the
#   kernel's own delay: the bench runs in a network namespace of its own
#   (unshare -n) whose loopback netem delays by 500 µs each way (1 ms round
#   trip), kad and the client both on 127.0.0.1 in it. Needs root (or user
#   namespaces), iproute2 and the kernel's sch_netem; skipped, saying why,
#   where any is missing.
# Also writes PNG plots: launch_overhead.png, saxpy_by_size.png, latency_by_clients.png.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: bench/run.sh [--quick|--full] [--out DIR] [--filter REGEX] [--min-time S] [--device ID] [--no-install] [--build DIR] [--no-build] [--netem]"
profile=quick
out=bench/out
filter=.
min_time=0.5
install=1
build=build
do_build=1
netem=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) profile=quick ;;
    --full) profile=full; min_time=1 ;;
    --out) out=$2; shift ;;
    --filter) filter=$2; shift ;;
    --min-time) min_time=$2; shift ;;
    --device) export KAD_BENCH_DEVICE=$2; shift
      # null:0 (backends/null/) is off unless asked for.
      case $KAD_BENCH_DEVICE in null:*) export KAD_NULL_DEVICE=1 ;; esac ;;
    --no-install) install=0 ;;
    --build) build=$2; shift ;;
    --no-build) do_build=0 ;;
    --netem) netem=1 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
if [ "$install" = 1 ]; then
  bash deploy/install-deps.sh
  # The plots need Debian's matplotlib (for /usr/bin/python3).
  if ! dpkg-query -W -f='${Status}' python3-matplotlib 2>/dev/null | grep -q "install ok installed"; then
    if [ "$(id -u)" -eq 0 ]; then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        python3-matplotlib || echo "run.sh: could not install python3-matplotlib: no plots" >&2
    else
      echo "run.sh: python3-matplotlib missing: results without plots" >&2
    fi
  fi
fi
if [ "$do_build" = 1 ]; then
  cmake -S . -B "$build" -G Ninja >/dev/null
  cmake --build "$build" -j2 --target kad_bench
fi
bench="$build/bench/kad_bench"
if [ ! -x "$bench" ]; then
  echo "run.sh: $bench does not exist (build it, or drop --no-build)" >&2
  exit 1
fi
mkdir -p "$out"
if [ -n "${KAD_BENCH_DEVICE:-}" ]; then echo "run.sh: device $KAD_BENCH_DEVICE (KAD_BENCH_DEVICE)"; fi
bench_args=(--profile="$profile" --benchmark_min_time="$min_time"
  --benchmark_out="$out/results.json" --benchmark_out_format=json)
if [ "$netem" = 1 ]; then
  delay_loopback='ip link set lo up && tc qdisc add dev lo root netem delay 500us'
  if ! command -v unshare >/dev/null || ! command -v tc >/dev/null; then
    echo "run.sh --netem: skipped: needs unshare (util-linux) and tc (iproute2)" >&2
    exit 0
  fi
  if ! why=$(unshare -n sh -c "$delay_loopback" 2>&1); then
    echo "run.sh --netem: skipped: cannot delay a network namespace's loopback here: $why" >&2
    exit 0
  fi
  [ "$filter" = . ] && filter='^grpc-tcp-netem-1ms/'
  # The namespace's shell delays its loopback, then becomes the bench.
  unshare -n sh -c "$delay_loopback && KAD_BENCH_LINK=netem exec \"\$0\" \"\$@\"" \
    "$bench" --benchmark_filter="$filter" "${bench_args[@]}"
else
  "$bench" --benchmark_filter="$filter" "${bench_args[@]}"
fi
machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(awk '/^MemTotal:/ {print int($2 / 1048576)}' /proc/meminfo) GiB"
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3 || true)
if [ -z "$python" ]; then
  echo "run.sh: no python3: wrote $out/results.json only (no results.md, no plots)" >&2
  exit 0
fi
"$python" bench/report.py "$out/results.json" "$out/results.md" "$machine"
echo "wrote $out/results.json and $out/results.md"
ls "$out"/*.png 2>/dev/null || true
