#!/bin/bash
# Call 3 (2026-12-06; planned as next/call.sh): the s2mel thread held to S2MEL_AHEAD steps ahead of the card
# (batching.StepsAhead), at load. Call 2 showed retakes waiting 0.44-0.95 s for s2mel
# at 64 in flight because the thread launched a group's 25 steps at once. The
# prediction: a retake's s2mel wait at 64 falls to about a step's few tens of ms and
# its p95 (lines up to 5 s) from 1.6 s to about 1 s; throughput within the noise of
# call 2's (none first 59-62 audio s/s at 64); rolling s2mel, measured before with the
# same run-ahead, is rerun beside groups. Runs the code in .devbin/now (git archive
# HEAD tts/hosts bench/gpu bench/gpucompare/testdata gpu/profile.go); carry it.
TOP=$OUT; R=$TOP/r; mkdir -p $R
cd .devbin/now
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $R/gpu.txt
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 150 python3 -m unittest -v \
  test_batching.StepsAheadTest test_batching.CudaGraphTest test_batching.S2MelLoopTest test_indextts_batching \
  > $R/tests.log 2>&1; echo "== tests rc=$?"
  grep -B2 -A25 "^FAIL:\|^ERROR:" $R/tests.log | head -60; tail -3 $R/tests.log)
bb() { # name concurrency limit host-args batch_bench-args...
  local name=$1 c=$2 limit=$3 host=$4; shift 4
  timeout $limit python3 bench/gpu/batch_bench.py --stride 4 --concurrency $c --lines 96 --warm --s2mel-dtype bf16 \
    --host-args="$host" "$@" --out $R/$name --name=-$name > $R/$name.log 2>&1
  echo "== $name rc=$?"; grep "^| [0-9]" $R/$name.log | tail -6
  (cd $TOP && tar czf res.tgz r) # what ran comes back even if a later run meets the call's limit
}
bb first 1,16,16 130 --vocoder-fused --first-every 8
bb none 16,16 70 --vocoder-fused
bb first64 64 50 --vocoder-fused --first-every 8
bb few64 64 50 --vocoder-fused --first-every 32
bb none64 64 50 --vocoder-fused
bb rolling 16,16 70 "--vocoder-fused --s2mel-rolling"
bb rolling64 64 50 "--vocoder-fused --s2mel-rolling"
cd $TOP && tar czf res.tgz r && rm -rf r
echo "== done"
