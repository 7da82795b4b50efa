#!/bin/bash
# Before (fd9b40d) and after (a thread per queue in a worker on PoCL's
# basic driver, a kernel handle per overlapping launch in the OpenCL
# backend), alternating, each bench binary with its own kad (the workers'
# executable) in build/server/kad. Workers on basic
# (KAD_BENCH_POCL_WORKER_DRIVER), then the default (pthread) for the
# in-process paths the backend change touches.
cd /work/main
K=build/server/kad
OUT=bench/results/2026-12-03-worker-queue-executors
summarise() {
  python3 - "$1" <<'PY'
import json,sys
j=json.load(open(sys.argv[1]))
out=[]
for x in j['benchmarks']:
    n=x['name'].replace('/static workgroup, static ndrange','').replace('/real_time','').replace('/iterations:1/manual_time','').replace('/iterations:5/manual_time','')
    if 'concurrency' in n: v='%.1fk/s p50=%.0fus p99=%.0fus jain=%.3f'%(x['launches_per_s']/1e3, x['p50_us'], x['p99_us'], x['jain'])
    elif 'pipelined' in n: v='%.0fk/s'%(x['items_per_second']/1e3)
    elif 'time_to_load' in n: v='%.1fms'%x['real_time']
    else: v='%.1fus'%(x['real_time']/1e3 if x['time_unit']=='ns' else x['real_time'])
    out.append(n+' = '+v)
print(sys.argv[1].split('/')[-1]); print('\n'.join('  '+o for o in out), flush=True)
PY
}
for r in 1 2; do
  for v in before after; do
    cp /tmp/ab2/$v/kad $K
    KAD_BENCH_POCL_WORKER_DRIVER=basic /tmp/ab2/$v/kad_bench \
      --benchmark_filter='^(raw|worker-shm|worker-grpc-unix)/(launch/static workgroup, static ndrange|pipelined/|pipelined-2000/)|^worker-shm/(concurrency|time_to_load)' \
      --benchmark_min_time=0.5 --benchmark_out=$OUT/basic-$v-$r.json --benchmark_out_format=json > /dev/null 2>&1
    summarise $OUT/basic-$v-$r.json
  done
done
for v in before after; do
  cp /tmp/ab2/$v/kad $K
  /tmp/ab2/$v/kad_bench \
    --benchmark_filter='^(raw|shm|grpc-unix)/(launch/static workgroup, static ndrange|pipelined/)' \
    --benchmark_min_time=0.5 --benchmark_out=$OUT/pthread-$v.json --benchmark_out_format=json > /dev/null 2>&1
  summarise $OUT/pthread-$v.json
done
cp /tmp/ab2/after/kad $K
