for rep in 1 2 3 4; do
for cd in 4 8 12; do
  echo "== cd=$cd rep=$rep"
  KAD_EXP_CD=$cd ./build/bench/kad_bench --benchmark_filter='worker-shm/concurrency/clients:(16|32)' 2>&1 | grep -E "concurrency" | sed 's/ \+/ /g' | cut -d' ' -f1,7-
done; done
