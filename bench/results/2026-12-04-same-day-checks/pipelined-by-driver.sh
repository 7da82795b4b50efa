#!/bin/bash
# Pipelined launches through workers (PoCL basic) against the raw driver on
# PoCL's default device (pthread) and on basic, alternating, one kad_bench.
B=${B:-build/bench/kad_bench}
OUT=${1:-/tmp}
F='^raw/pipelined|^(shm|worker-shm|grpc-unix|worker-grpc-unix)/pipelined'
rate() { python3 -c '
import json,sys
for x in json.load(open(sys.argv[1]))["benchmarks"]:
    print("  %-58s %7.0fk/s" % (x["name"].replace("/static workgroup, dynamic ndrange/real_time",""), x["items_per_second"]/1e3))' "$1"; }
for r in 1 2 3; do
  $B --benchmark_filter="$F" --benchmark_min_time=0.5 --benchmark_out=$OUT/default-$r.json --benchmark_out_format=json > /dev/null 2>&1
  echo "round $r, PoCL's default device (pthread) for raw/ and in-process modes; workers on basic"; rate $OUT/default-$r.json
  POCL_DEVICES=basic $B --benchmark_filter='^raw/pipelined' --benchmark_min_time=0.5 --benchmark_out=$OUT/raw-basic-$r.json --benchmark_out_format=json > /dev/null 2>&1
  echo "round $r, POCL_DEVICES=basic"; rate $OUT/raw-basic-$r.json
done
