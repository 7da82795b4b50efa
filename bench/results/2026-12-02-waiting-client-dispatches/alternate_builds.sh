#!/bin/bash
# Alternates the builds before (head2: c34dd91) and after (wait-dispatch: a
# waiting client sends its queue's granted launches) on the concurrency cases
# and the synchronous / pipelined launch, in kad's process and through workers.
cd /work/main
for r in 1 2 3; do
  for v in head2 wait-dispatch; do
    cp /tmp/$v/kad build/server/kad
    /tmp/$v/kad_bench --benchmark_filter='concurrency/clients:(4|16|32)|^(raw|shm|worker-shm)/(launch/static workgroup, dynamic ndrange|pipelined/static workgroup, dynamic)' --benchmark_min_time=0.5 --benchmark_out=/tmp/res/conc-$v-$r.json --benchmark_out_format=json > /dev/null 2>&1
    python3 - /tmp/res/conc-$v-$r.json <<'PY'
import json,sys
j=json.load(open(sys.argv[1]))
out=[]
for x in j['benchmarks']:
    p=x['name'].split('/')
    n=p[0]+'/'+p[1]+('/'+p[2] if 'concurrency' in x['name'] else '')
    if x.get('error_occurred'): out.append(n+':ERR'); continue
    if 'concurrency' in x['name']: v='%.1fk(J%.2f)'%(x['launches_per_s']/1e3, x['jain'])
    elif 'pipelined' in x['name']: v='%.0fk/s'%(x['items_per_second']/1e3)
    else: v='%.1fus'%(x['real_time']/1e3)
    out.append(n.replace('concurrency/clients:','c')+'='+v)
print(sys.argv[1].split('/')[-1], ' '.join(out), flush=True)
PY
  done
done
cp /tmp/wait-dispatch/kad build/server/kad
