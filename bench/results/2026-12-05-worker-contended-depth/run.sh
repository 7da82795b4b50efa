#!/bin/bash
# The committed change, before (1d83043: the CPU device whose sessions run
# in workers shares depth/16 while queues compete) and after (4 launches per
# compute unit; `OUT=final` was its first form, depth/8: 8 slots here too), each
# side its own kad_bench (the daemon, where the scheduler is) and its own kad
# (the workers), alternating, two rounds. /tmp/ci-check is a clean clone of
# 1d83043, built.
cd "$(dirname "$0")/../../.."
FILTER='^worker-shm/(launch/static workgroup, static ndrange|pipelined/static workgroup, dynamic ndrange|concurrency/)|^shm/launch/static workgroup, static ndrange'
bench/ab.sh --filter "$FILTER" --rounds 2 --min-time 0.5 \
  --out bench/results/2026-12-05-worker-contended-depth/${OUT:-final-committed} \
  before=/tmp/ci-check/build/bench/kad_bench after=build/bench/kad_bench
