#!/bin/bash
cd /work/main
K=build/server/kad
for r in 1 2 3; do
  for v in before after; do
    cp /tmp/ab/$v/kad $K
    /tmp/ab/$v/kad_bench --benchmark_filter="shared-grpc-tcp/fair_share/(equal weights, tenant a's launches 8x longer|weights 4)" --benchmark_out=/tmp/ab/res/f8-$v-$r.json --benchmark_out_format=json > /dev/null 2>&1
    python3 - /tmp/ab/res/f8-$v-$r.json <<'PY'
import json,sys
j=json.load(open(sys.argv[1]))
print(sys.argv[1].split('/')[-1], ' | '.join('%s a_share=%.3f'%(x['name'].split('/')[2], x['a_share']) for x in j['benchmarks']), flush=True)
PY
  done
done
cp /tmp/ab/after/kad $K
