#!/bin/bash
# alternates the kad binary (the worker) under one kad_bench; prints worker-shm figures
cd /work/main
for r in 1 2 3 4; do
  for v in wbefore wafter; do
    cp /tmp/$v/kad build/server/kad
    build/bench/kad_bench --benchmark_filter='^(raw|worker-shm)/(launch/static workgroup, dynamic ndrange|pipelined)' --benchmark_min_time=0.5 --benchmark_out=/tmp/alt-$v-$r.json --benchmark_out_format=json > /dev/null 2>&1
    python3 -c "
import json;j=json.load(open('/tmp/alt-$v-$r.json'))
print('$v $r', ' '.join('%s:%s'%(x['name'].split('/')[0]+'/'+x['name'].split('/')[1], ('%.0fk'%(x['items_per_second']/1e3)) if 'pipelined' in x['name'] else '%.1fus'%x['real_time']) for x in j['benchmarks']))"
  done
done
cp /tmp/wafter/kad build/server/kad
