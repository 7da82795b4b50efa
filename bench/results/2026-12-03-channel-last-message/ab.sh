#!/bin/bash
# The shared-memory launch path before (6cfb4c8) and after (5e381ee: the
# client also checks the completion tail's range per answer).
cd /work/main
K=build/server/kad
for r in 1 2 3; do
  for v in before after; do
    if [ $v = before ]; then B=/tmp/ab/after/kad_bench; cp /tmp/ab/after/kad $K; else B=/tmp/ab/head/kad_bench; cp /tmp/ab/head/kad $K; fi
    $B --benchmark_filter='^shm/(launch/static workgroup, static ndrange|pipelined/static workgroup, dynamic|echo)' --benchmark_min_time=0.5 --benchmark_out=/tmp/ab/res/client-$v-$r.json --benchmark_out_format=json > /dev/null 2>&1
    python3 - /tmp/ab/res/client-$v-$r.json <<'PY'
import json,sys
j=json.load(open(sys.argv[1]))
out=[]
for x in j['benchmarks']:
    n='/'.join(x['name'].split('/')[:2])
    v='%.0fk/s'%(x['items_per_second']/1e3) if 'pipelined' in x['name'] else '%.2fus'%(x['real_time']/1e3 if x['time_unit']=='ns' else x['real_time'])
    out.append(n+'='+v)
print(sys.argv[1].split('/')[-1], ' '.join(out), flush=True)
PY
  done
done
cp /tmp/ab/head/kad $K
