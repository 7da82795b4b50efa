#!/bin/bash
# Alternates the builds before (HEAD) and after (counted preload messages) on
# worker-shm time_to_load and the synchronous/pipelined worker launch.
cd /work/main
for r in 1 2 3; do
  for v in before after; do
    cp /tmp/$v/kad build/server/kad
    /tmp/$v/kad_bench --benchmark_filter='worker-shm/time_to_load|^worker-shm/(launch/static workgroup, dynamic ndrange|pipelined)' --benchmark_min_time=0.5 --benchmark_out=/tmp/res/ttl-$v-$r.json --benchmark_out_format=json > /dev/null 2>&1
    python3 - /tmp/res/ttl-$v-$r.json <<'PY'
import json,sys
j=json.load(open(sys.argv[1]))
out=[]
for x in j['benchmarks']:
    n='/'.join(x['name'].split('/')[:3])[:60]
    if x.get('error_occurred'): out.append(n+':ERR'); continue
    if 'pipelined' in x['name']: v='%.0fk/s'%(x['items_per_second']/1e3)
    elif 'time_to_load' in x['name']: v='%.1fms'%(x['real_time'] if x['time_unit']=='ms' else x['real_time']/1e6)
    else: v='%.1fus'%(x['real_time']/1e3)
    out.append(n+'='+v)
print(sys.argv[1].split('/')[-1], ' | '.join(out), flush=True)
PY
  done
done
cp /tmp/after/kad build/server/kad
