#!/bin/bash
cd /work/main
for r in 3 4 5; do
  for v in turns first first+session-groups; do
    case $v in turns) E="KAD_EXP_NONE=1";; first) E="KAD_EXP_FIRST=1";; *) E="KAD_EXP_FIRST=1 KAD_EXP_SESSION_GROUPS=1";; esac
    env $E build/bench/kad_bench --benchmark_filter='^worker-shm/concurrency/clients:(16|32)/' --benchmark_out=/tmp/ab/res/exp-groups-$v-$r.json --benchmark_out_format=json > /dev/null 2>&1
    python3 - /tmp/ab/res/exp-groups-$v-$r.json $v <<'PY'
import json,sys
j=json.load(open(sys.argv[1]))
print(sys.argv[2], ' '.join('%s=%.1fk(J%.2f)'%(x['name'].split('/')[2], x['launches_per_s']/1e3, x['jain']) for x in j['benchmarks']), flush=True)
PY
  done
done
