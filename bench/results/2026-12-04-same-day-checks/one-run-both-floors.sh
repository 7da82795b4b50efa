#!/bin/bash
# The launch and pipelined cases with both raw floors in one run (raw/ on
# PoCL's default device, raw-basic/ on basic as kad's workers run it), twice;
# report.py's tables (x raw, x raw-basic).
OUT=${1:-bench/results/2026-12-04-same-day-checks}
F='^(raw|raw-basic|shm|worker-shm|grpc-unix|worker-grpc-unix)/(launch/static workgroup, static ndrange|pipelined)'
for r in 1 2; do
  build/bench/kad_bench --benchmark_filter="$F" --benchmark_min_time=0.5 \
    --benchmark_out=$OUT/both-floors-$r.json --benchmark_out_format=json > /dev/null 2>&1
  python3 bench/report.py $OUT/both-floors-$r.json $OUT/both-floors-$r.md "2-core VM, round $r" > /dev/null
done
