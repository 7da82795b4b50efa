#!/usr/bin/env bash
# Runs kad's benchmark suite side by side with the raw driver and writes
# DIR/results.json (Google Benchmark JSON) and DIR/results.md (each mode's
# ratio to raw/).
#   bench/run.sh [--quick|--full] [--out DIR] [--filter REGEX]
# --quick (default): a few sizes, about three minutes on 2 cores; --full: all of them.
# Also writes PNG plots: launch_overhead.png, saxpy_by_size.png, latency_by_clients.png.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=quick
out=bench/out
filter=.
min_time=0.5
while [ $# -gt 0 ]; do
  case $1 in
    --quick) profile=quick ;;
    --full) profile=full; min_time=1 ;;
    --out) out=$2; shift ;;
    --filter) filter=$2; shift ;;
    --min-time) min_time=$2; shift ;;
    *) echo "usage: bench/run.sh [--quick|--full] [--out DIR] [--filter REGEX]" >&2; exit 2 ;;
  esac
  shift
done
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
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j2 --target kad_bench
mkdir -p "$out"
build/bench/kad_bench --profile="$profile" --benchmark_filter="$filter" \
  --benchmark_min_time="$min_time" --benchmark_out="$out/results.json" \
  --benchmark_out_format=json
machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/ {print $2}') GiB"
/usr/bin/python3 bench/report.py "$out/results.json" "$out/results.md" "$machine"
echo "wrote $out/results.json and $out/results.md"
ls "$out"/*.png 2>/dev/null || true
