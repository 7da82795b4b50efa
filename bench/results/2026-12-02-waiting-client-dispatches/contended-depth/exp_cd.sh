for rep in 1 2; do
for cd in 4 8 16 32; do
  echo "== cd=$cd rep=$rep"
  KAD_EXP_CD=$cd ./build/bench/kad_bench --benchmark_filter='concurrency/clients:(16|32)|worker-grpc-tcp/fair_share' 2>&1 | grep -E "concurrency|fair_share" | sed 's/ \+/ /g' | cut -d' ' -f1,7-
done; done
