#!/usr/bin/env python3
"""Runs kad_bench builds in alternation, N rounds, and prints each run's figures
(launch: real time per launch; pipelined: launches/s) and the medians.

    python3 alternate.py BUILD_A,BUILD_B ROUNDS FILTER

where /tmp/BUILD_X/kad_bench is each build's benchmark binary (with its
kad_bench_client beside it). Alternating runs is what makes a comparison on
a noisy VM mean anything: its raw driver figures move by 2x between runs.
"""
import json,subprocess,sys,statistics
bins=sys.argv[1].split(',');rounds=int(sys.argv[2]);flt=sys.argv[3]
res={b:{} for b in bins}
for r in range(rounds):
  for b in bins:
    subprocess.run([f'/tmp/{b}/kad_bench',f'--benchmark_filter={flt}','--benchmark_min_time=0.5','--benchmark_out=/tmp/cmp.json','--benchmark_out_format=json'],capture_output=True,text=True)
    j=json.load(open('/tmp/cmp.json'))
    row={}
    for x in j['benchmarks']:
      n=x['name'].replace('static workgroup, ','').replace('/real_time','')
      row[n]=x.get('items_per_second') or x['real_time']
    for n,v in row.items(): res[b].setdefault(n,[]).append(v)
    raw=[v for n,v in row.items() if n.startswith('raw/pipelined')]
    print(b, r, ' '.join(f"{n.split('/')[0]}:{v/1000:.0f}k" if 'pipelined' in n else f"{n.split('/')[0]}:{v/1000:.1f}us" for n,v in row.items()), ' ratio shm/raw pipelined: %.2f'%(row.get('shm/pipelined/dynamic ndrange',0)/raw[0]) if raw else '', flush=True)
for b in bins:
  print(b, {n:round(statistics.median(v)) for n,v in res[b].items()})
