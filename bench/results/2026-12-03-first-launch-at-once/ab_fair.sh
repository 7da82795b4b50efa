#!/bin/bash
# Fair shares between tenants, before and after: unchanged by design (the
# new rule applies only while one tenant's queues compete).
cd /work/main
K=build/server/kad
for r in 1; do
  for v in before after; do
    cp /tmp/ab/$v/kad $K
    /tmp/ab/$v/kad_bench --benchmark_filter='fair_share' --benchmark_out=/tmp/ab/res/fair-$v-$r.json --benchmark_out_format=json > /tmp/ab/res/fair-$v-$r.log 2>&1
    python3 - /tmp/ab/res/fair-$v-$r.json <<'PY'
import json,sys
j=json.load(open(sys.argv[1]))
for x in j['benchmarks']:
    keys={k:v for k,v in x.items() if k not in ('name','run_name','run_type','repetitions','repetition_index','threads','iterations','real_time','cpu_time','time_unit','family_index','per_family_instance_index')}
    print(sys.argv[1].split('/')[-1], x['name'].split('/iterations')[0], ' '.join('%s=%.3g'%(k,v) for k,v in keys.items() if isinstance(v,(int,float))), flush=True)
PY
  done
done
cp /tmp/ab/after/kad $K
echo done
