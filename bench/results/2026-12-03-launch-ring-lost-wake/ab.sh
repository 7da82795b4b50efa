set -e
cd /tmp/k/b
K=/work/main/build/server/kad
for i in 1 2 3; do
  for b in before after; do
    if [ $b = before ]; then cp kad_old $K; B=./uids_bench; else cp kad_new $K; B=./wakes_bench; fi
    $B --benchmark_filter='^worker-shm/pipelined' --benchmark_min_time=0.5 --benchmark_repetitions=12 --benchmark_out=pipe-$b-$i.json --benchmark_out_format=json > /dev/null 2>&1
    $B --benchmark_filter='^worker-shm/(launch/static workgroup, static ndrange)|^worker-shm/concurrency/clients:(1|16)/' --benchmark_min_time=0.5 --benchmark_out=other-$b-$i.json --benchmark_out_format=json > /dev/null 2>&1
  done
done
cp kad_new $K
echo done
