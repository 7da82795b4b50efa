#!/bin/bash
# The concurrency cases of ee7a0bd (the kad_bench and kad of 2026-12-03's
# 80-86k launches/s for one client through workers) and of this tree, on one
# day, alternating: was the half of that measured on 2026-12-04 (morning) a
# regression in between? Each kad_bench runs its own tree's kad as the
# workers (build/server/kad beside it), both on PoCL's basic.
#   git worktree add /tmp/old-ee7 ee7a0bd
#   cmake -S /tmp/old-ee7 -B /tmp/old-ee7/build -G Ninja
#   cmake --build /tmp/old-ee7/build -j2 --target kad_bench kad
OLD=${OLD:-/tmp/old-ee7/build/bench/kad_bench}
NEW=${NEW:-build/bench/kad_bench}
OUT=${1:-/tmp}
F='^raw/launch/static workgroup, static ndrange|^(shm|worker-shm)/concurrency/clients:(1|4|16|32)/'
sum() { python3 - "$1" <<'PY'
import json,sys
j=json.load(open(sys.argv[1]))
print(sys.argv[1])
for x in j['benchmarks']:
    n=x['name']
    if 'concurrency' in n: print('  %-45s %6.1fk/s p50=%5.0fus p99=%6.0fus jain=%.3f'%(n.split('/iter')[0], x['launches_per_s']/1e3, x['p50_us'], x['p99_us'], x['jain']))
    else: print('  %-45s %.1fus'%(n, x['real_time']/1e3 if x['time_unit']=='ns' else x['real_time']))
PY
}
for r in 1 2; do
  for side in old new; do
    bin=$OLD; [ $side = new ] && bin=$NEW
    KAD_BENCH_POCL_WORKER_DRIVER=basic $bin --benchmark_filter="$F" --benchmark_min_time=0.5 \
      --benchmark_out=$OUT/$side-$r.json --benchmark_out_format=json > /dev/null 2>&1
    sum $OUT/$side-$r.json
  done
done
