#!/bin/bash
# Workers on PoCL's basic driver without (a2e0181) and with the wide device
# (PoCL's pthread beside basic in each worker, for launches that gain from
# every core), alternating; one kad_bench binary (this commit's), each
# side's kad as the workers' executable in build/server/kad. Workers on
# pthread (the default) once, as the reference.
cd /work/main
K=build/server/kad
OUT=bench/results/2026-12-03-basic-wide-launches
FILTER='^(raw|worker-shm)/(launch/static workgroup, static ndrange|pipelined/|saxpy/default/Float32/1048576|saxpy/static workgroup=\(1024,\)/Float32/1048576|const/@Const/Float32/65536)|^worker-shm/concurrency'
summarise() {
  python3 - "$1" <<'PY'
import json,sys
j=json.load(open(sys.argv[1]))
out=[]
for x in j['benchmarks']:
    n=x['name'].replace('/static workgroup, static ndrange','').replace('/static workgroup, dynamic ndrange','').replace('/real_time','').replace('/iterations:1/manual_time','')
    if 'concurrency' in n: v='%.1fk/s p50=%.0fus p99=%.0fus jain=%.3f'%(x['launches_per_s']/1e3, x['p50_us'], x['p99_us'], x['jain'])
    elif 'pipelined' in n: v='%.0fk/s'%(x['items_per_second']/1e3)
    else: v='%.1fus'%(x['real_time']/1e3 if x['time_unit']=='ns' else x['real_time'])
    out.append(n+' = '+v)
print(sys.argv[1].split('/')[-1]); print('\n'.join('  '+o for o in out), flush=True)
PY
}
for r in 1 2; do
  for v in before after; do
    cp /tmp/ab3/kad-$v $K
    KAD_BENCH_POCL_WORKER_DRIVER=basic /tmp/ab3/kad_bench --benchmark_filter="$FILTER" \
      --benchmark_min_time=0.5 --benchmark_out=$OUT/basic-$v-$r.json --benchmark_out_format=json > /dev/null 2>&1
    summarise $OUT/basic-$v-$r.json
  done
done
cp /tmp/ab3/kad-after $K
/tmp/ab3/kad_bench --benchmark_filter="$FILTER" --benchmark_min_time=0.5 \
  --benchmark_out=$OUT/pthread.json --benchmark_out_format=json > /dev/null 2>&1
summarise $OUT/pthread.json
