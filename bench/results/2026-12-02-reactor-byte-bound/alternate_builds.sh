#!/bin/bash
F='^(grpc-unix|grpc-tcp)/(echo|launch/static workgroup, dynamic ndrange|pipelined/static workgroup, dynamic ndrange)/'
for r in 1 2 3; do
  for b in before after; do
    KAD_BENCH_SUBMIT_STREAMS=reactors /tmp/rb/$b/kad_bench --benchmark_filter="$F" --benchmark_min_time=0.5 --benchmark_out=/tmp/rb/$b-r$r.json --benchmark_out_format=json > /tmp/rb/$b-r$r.log 2>&1
  done
done
