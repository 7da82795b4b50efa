#!/bin/bash
# Workers on basic before (9698a4c: each session's worker built a kernel for
# the wide device itself) and after (09952f2: kad's compile workers build it
# once per key, kept in the code cache, handed to each worker that asks),
# each side its own kad_bench (the daemon) and its own kad (the workers),
# alternating, two rounds. /tmp/ci-check is a clean clone of 9698a4c, built.
cd "$(dirname "$0")/../../.."
SIZES='(65536|262144|1048576)'
FILTER="^worker-shm/(launch/static workgroup, static ndrange|pipelined/|saxpy/default/Float32/$SIZES|saxpy/static workgroup=\\(1024,\\)/Float32/$SIZES|const/@Const/Float32/65536|time_to_load)|^worker-shm/concurrency"
bench/ab.sh --filter "$FILTER" --rounds 2 --min-time 0.5 \
  --out bench/results/2026-12-05-wide-builds-from-compile-workers \
  before=/tmp/ci-check/build/bench/kad_bench after=build/bench/kad_bench
