#!/bin/bash
# --pocl-worker-driver pthread (the default) against basic, alternating,
# with the workers' daemon of kad_bench (KAD_BENCH_POCL_WORKER_DRIVER).
cd /work/main
OUT=bench/results/2026-12-03-pocl-worker-driver
for r in 1 2; do
  for v in pthread basic; do
    KAD_BENCH_POCL_WORKER_DRIVER=$v ./build/bench/kad_bench \
      --benchmark_filter='^(raw|worker-shm|worker-grpc-unix)/(launch/static workgroup, static ndrange|pipelined/|pipelined-2000/)|^worker-shm/(concurrency|time_to_load)' \
      --benchmark_min_time=0.5 --benchmark_out=$OUT/$v-$r.json --benchmark_out_format=json > /dev/null 2>&1
    python3 - $OUT/$v-$r.json <<'PY'
import json,sys
j=json.load(open(sys.argv[1]))
out=[]
for x in j['benchmarks']:
    n=x['name'].replace('/static workgroup, static ndrange','').replace('/static workgroup, dynamic ndrange','').replace('/real_time','').replace('/iterations:1/manual_time','').replace('/iterations:5/manual_time','')
    if 'concurrency' in n: v='%.1fk/s p99=%.0fus jain=%.3f'%(x['launches_per_s']/1e3, x['p99_us'], x['jain'])
    elif 'pipelined' in n: v='%.0fk/s'%(x['items_per_second']/1e3)
    elif 'time_to_load' in n: v='%.1fms'%x['real_time']
    else: v='%.1fus'%(x['real_time']/1e3)
    out.append(n+' = '+v)
print(sys.argv[1].split('/')[-1]); print('\n'.join('  '+o for o in out), flush=True)
PY
  done
done
