#!/bin/bash
# Workers on PoCL's basic driver before (b3c7016: a kernel went to the wide
# device after two launches of 1 ms on one core, and stayed while its time
# there times the cores was 1 ms) and after (wide_choice.h: measured, from
# two launches of 200 µs, and tried again now and then; the wide build made
# beside the launches), alternating, and workers on pthread with this
# commit's kad. One kad_bench binary (this commit's, whose worker-mode
# warm-up outlasts a wide build); each side's kad as
# the workers' executable in build/server/kad. /tmp/ab5/kad-{before,after}
# and /tmp/ab5/kad_bench are copies of the two builds.
cd /work/main
K=build/server/kad
OUT=bench/results/2026-12-04-measured-wide-choice
SIZES='(65536|262144|1048576)'
FILTER="^(raw|worker-shm)/(launch/static workgroup, static ndrange|pipelined/|saxpy/default/Float32/$SIZES|saxpy/static workgroup=\\(1024,\\)/Float32/$SIZES|const/@Const/Float32/65536)|^worker-shm/concurrency|^worker-shm/time_to_load"
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
run() {  # side driver json
  cp /tmp/ab5/kad-$1 $K
  KAD_BENCH_POCL_WORKER_DRIVER=$2 /tmp/ab5/kad_bench --benchmark_filter="$FILTER" \
    --benchmark_min_time=0.5 --benchmark_out=$OUT/$3 --benchmark_out_format=json > /dev/null 2>&1
  summarise $OUT/$3
}
for r in 1 2; do
  run before basic basic-before-$r.json
  run after basic basic-after-$r.json
  run after pthread pthread-$r.json
done
cp /tmp/ab5/kad-after $K
