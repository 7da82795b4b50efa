#!/bin/bash
# Alternates before (a285206) and after (a queue's first launch free of the
# contended depth while one tenant's queues compete), each bench binary with its own kad.
cd /work/main
K=build/server/kad
for r in 1 2 3; do
  for v in before after; do
    cp /tmp/ab/$v/kad $K
    /tmp/ab/$v/kad_bench --benchmark_filter='^(shm|worker-shm)/concurrency/clients:(1|4|16|32)/|^(raw|shm|worker-shm)/(launch/static workgroup, static ndrange|pipelined/static workgroup, dynamic)' --benchmark_min_time=0.5 --benchmark_out=/tmp/ab/res/$v-$r.json --benchmark_out_format=json > /tmp/ab/res/$v-$r.log 2>&1
    python3 - /tmp/ab/res/$v-$r.json <<'PY'
import json,sys
j=json.load(open(sys.argv[1]))
out=[]
for x in j['benchmarks']:
    p=x['name'].split('/')
    n=p[0]+'/'+p[1]+('/'+p[2] if 'concurrency' in x['name'] else '')
    if x.get('error_occurred'): out.append(n+':ERR'); continue
    if 'concurrency' in x['name']: v='%.1fk(J%.2f,p99 %.2fms)'%(x['launches_per_s']/1e3, x['jain'], x.get('p99_ms',0))
    elif 'pipelined' in x['name']: v='%.0fk/s'%(x['items_per_second']/1e3)
    else: v='%.1fus'%(x['real_time']/1e3)
    out.append(n.replace('concurrency/clients:','c')+'='+v)
print(sys.argv[1].split('/')[-1], ' '.join(out), flush=True)
PY
  done
done
cp /tmp/ab/after/kad $K
echo done
