#!/bin/bash
# Call 4 (2026-12-06): the s2mel thread held to two steps ahead of the card
# (batching.StepsAhead, .devbin/now = e6af6ef and after) against the host before it
# (.devbin/old = e6af6ef~1), alternating on one card, since call 3 ran only the new
# code on a machine slower than call 2's (a decode step's CPU time 0.57 against 0.36 ms
# alone) and so could not say what the bound changed. 64 in flight with every 8th line
# first, twice each, then none first and 16 in flight with retakes once each.
# Prediction (call 3's figures beside call 2's): the bound does not lower a retake's
# wait for s2mel and costs throughput at 64. Carry .devbin/now and .devbin/old.
TOP=$OUT; R=$TOP/r; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $R/gpu.txt
bb() { # code name concurrency limit host-args batch_bench-args...
  local code=$1 name=$2-$1 c=$3 limit=$4 host=$5; shift 5
  (cd .devbin/$code && timeout $limit python3 bench/gpu/batch_bench.py --stride 4 --concurrency $c --lines 96 --warm \
    --s2mel-dtype bf16 --host-args="$host" "$@" --out $R/$name --name=-$name > $R/$name.log 2>&1
  echo "== $name rc=$?"; grep "^| [0-9]" $R/$name.log | tail -2)
  (cd $TOP && tar czf res.tgz r) # what ran comes back even if a later run meets the call's limit
}
for i in 1 2; do
  bb now first64-$i 64 70 --vocoder-fused --first-every 8
  bb old first64-$i 64 70 --vocoder-fused --first-every 8
done
bb now none64 64 70 --vocoder-fused
bb old none64 64 70 --vocoder-fused
bb now first16 16 70 --vocoder-fused --first-every 8
bb old first16 16 70 --vocoder-fused --first-every 8
cd $TOP && tar czf res.tgz r && rm -rf r
echo "== done"
