#!/bin/bash
# call 1 (planned 2026-12-05; the device loans were paused that session, so it has not
# run): an editor's retakes ("first": true) at load. First the CUDA tests of the s2mel
# table and loop (rows set aside and seated again, with graphs), then batch_bench with
# every 8th line first (12 of 96 lines, 8 of them up to 5 s), warmed, s2mel bf16 with
# graphs, the vocoder fused: 1 in flight (alone), 16 twice and 64, against the same
# runs with no line first. Runs the code in .devbin/now (git archive HEAD tts/hosts
# bench/gpu bench/gpucompare/testdata gpu/profile.go).
TOP=$OUT; R=$TOP/r; mkdir -p $R
cd .devbin/now
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 200 python3 -m unittest -v \
  test_batching.CudaGraphTest test_batching.BatchingTest test_batching.S2MelLoopTest test_indextts_batching \
  > $R/tests.log 2>&1; echo "== tests rc=$?"
  grep -B2 -A25 "^FAIL:\|^ERROR:" $R/tests.log | head -80; tail -3 $R/tests.log)
bb() { # name concurrency first-every limit
  timeout $4 python3 bench/gpu/batch_bench.py --stride 4 --concurrency $2 --lines 96 --warm --s2mel-dtype bf16 \
    --host-args="--vocoder-fused" --first-every $3 --out $R/$1 --name=-$1 > $R/$1.log 2>&1
  echo "== $1 rc=$?"; grep "^| [0-9]" $R/$1.log | tail -8
}
bb first 1,16,16 8 150
bb none 16,16 0 100
bb first64 64 8 90
bb none64 64 0 90
cd $TOP && tar czf res.tgz r && rm -rf r
