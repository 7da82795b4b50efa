#!/bin/bash
# Alternates two builds of kad_bench and the kad beside it (the worker: its
# path is compiled into kad_bench as build/server/kad); worker-shm and raw.
cd /work/main
for r in 1 2 3 4 5; do
  for v in wold wring2; do
    cp /tmp/$v/kad build/server/kad
    /tmp/$v/kad_bench --benchmark_filter='^(raw|worker-shm)/(launch/static workgroup, dynamic ndrange|pipelined)' --benchmark_min_time=0.5 --benchmark_out=/tmp/alt5-$v-$r.json --benchmark_out_format=json > /dev/null 2>&1
    python3 - /tmp/alt5-$v-$r.json <<'PY'
import json,sys
j=json.load(open(sys.argv[1]))
out=[]
for x in j['benchmarks']:
    n=x['name'].split('/')[0]+'/'+x['name'].split('/')[1]
    if x.get('error_occurred'): out.append(n+':ERR '+x.get('error_message','')[:60]); continue
    out.append(n+':'+(('%.0fk'%(x['items_per_second']/1e3)) if 'pipelined' in x['name'] else '%.1fus'%(x['real_time']/1e3)))
print(sys.argv[1].split('/')[-1], ' '.join(out), flush=True)
PY
  done
done
cp /tmp/wring2/kad build/server/kad
