#!/usr/bin/env bash
# Compares kad_bench runs side by side: each side is a kad_bench binary and
# environment, the sides alternate round by round (a machine's drift falls
# on every side alike), and one table gives each case's figures per side.
#   bench/ab.sh --filter REGEX [--rounds N] [--min-time S] [--out DIR] SIDE...
# SIDE is NAME=SPEC, SPEC words separated by spaces: VAR=VALUE sets the
# side's environment, a word without '=' is its kad_bench (default:
# build/bench/kad_bench). For example, two builds' workers in one kad_bench,
# and workers on PoCL's pthread:
#   bench/ab.sh --filter '^worker-shm/launch' \
#     before='KAD_BENCH_KAD=/tmp/old/build/server/kad' after= \
#     pthread='KAD_BENCH_POCL_WORKER_DRIVER=pthread'
# or two builds' kad_bench: old=/tmp/old/build/bench/kad_bench new=
# Writes DIR/NAME-ROUND.json (Google Benchmark JSON) and DIR/ab.md, and
# prints the table.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: bench/ab.sh --filter REGEX [--rounds N] [--min-time S] [--out DIR] NAME=SPEC..."
filter="" rounds=2 min_time=0.5 out=bench/out/ab
sides=()
while [ $# -gt 0 ]; do
  case $1 in
    --filter) filter=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --min-time) min_time=$2; shift ;;
    --out) out=$2; shift ;;
    *=*) sides+=("$1") ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$filter" ] || [ ${#sides[@]} -eq 0 ]; then echo "$usage" >&2; exit 2; fi
mkdir -p "$out"
jsons=()
for ((r = 1; r <= rounds; r++)); do
  for side in "${sides[@]}"; do
    name=${side%%=*} spec=${side#*=}
    bench=build/bench/kad_bench envs=()
    for word in $spec; do
      case $word in *=*) envs+=("$word") ;; *) bench=$word ;; esac
    done
    json="$out/$name-$r.json"
    echo "ab.sh: round $r, $name: ${envs[*]:-} $bench" >&2
    if ! env "${envs[@]}" "$bench" --benchmark_filter="$filter" --benchmark_min_time="$min_time" \
      --benchmark_out="$json" --benchmark_out_format=json > "$out/$name-$r.log" 2>&1; then
      echo "ab.sh: $name's run $r failed; see $out/$name-$r.log" >&2
      exit 1
    fi
    jsons+=("$name=$json")
  done
done
python3 - "$out/ab.md" "${jsons[@]}" <<'PY'
import json, re, sys
from collections import OrderedDict

def figure(b):
    if "launches_per_s" in b:  # concurrency
        return "%.1fk/s (p99 %.1f ms, Jain %.2f)" % (b["launches_per_s"] / 1e3, b.get("p99_us", 0) / 1e3, b.get("jain", 0))
    if "items_per_second" in b:
        return "%.0fk/s" % (b["items_per_second"] / 1e3)
    if "bytes_per_second" in b:
        return "%.2f GB/s" % (b["bytes_per_second"] / 1e9)
    scale = {"ns": 1e-3, "us": 1, "ms": 1e3, "s": 1e6}[b["time_unit"]]
    return "%.1f µs" % (b["real_time"] * scale)

rows, sides = OrderedDict(), []
for arg in sys.argv[2:]:
    side, path = arg.split("=", 1)
    if side not in sides:
        sides.append(side)
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") == "aggregate":
            continue
        name = re.sub(r"/iterations:\d+|/(real|manual)_time$", "", b["name"])
        value = "error" if b.get("error_occurred") else figure(b)
        rows.setdefault(name, {}).setdefault(side, []).append(value)
lines = ["| case | " + " | ".join(sides) + " |", "|---|" + "---|" * len(sides)]
for name, by_side in rows.items():
    lines.append("| %s | %s |" % (name, " | ".join(", ".join(by_side.get(s, [])) for s in sides)))
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
