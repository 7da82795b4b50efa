#!/bin/bash
# The shared-memory path before (643b433) and after (the client sleeps at
# once behind many launches and for room in a full ring; kad wakes it for
# room at half the ring). Alternating, each bench binary with its own kad
# (the workers' executable) in build/server/kad.
cd /work/main
K=build/server/kad
mkdir -p /tmp/ab/res
for r in 1 2 3; do
  for v in before after; do
    cp /tmp/ab/$v/kad $K
    /tmp/ab/$v/kad_bench --benchmark_filter='^(raw|shm|worker-shm)/(launch/static workgroup, static ndrange|pipelined/|pipelined-2000/|echo)' --benchmark_min_time=0.5 --benchmark_out=/tmp/ab/res/$v-$r.json --benchmark_out_format=json > /dev/null 2>&1
    python3 - /tmp/ab/res/$v-$r.json <<'PY'
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
cp /tmp/ab/after/kad $K
