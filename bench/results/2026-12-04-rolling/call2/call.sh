#!/bin/bash
# call 2 (2026-12-04, third session): as call 1, after its fixes: slots keyed by the row
# (not its id), and rolling joins bounded by --s2mel-waste. First the CUDA tests of the table and the host (graph equality seated
# as a group and joining, audio batched and alone, the s2mel loop), then latency at 16
# lines in flight, 96 lines, warmed, s2mel bf16 with graphs, the vocoder fused:
# --s2mel-rolling (lines join at the next step) against groups (the default),
# alternating, and once at 64 in flight each. Runs the code in .devbin/now (git
# archive HEAD tts/hosts bench/gpu bench/gpucompare/testdata gpu/profile.go).
TOP=$OUT; R=$TOP/r; mkdir -p $R
cd .devbin/now
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 200 python3 -m unittest -v \
  test_batching.CudaGraphTest test_batching.BatchingTest test_batching.S2MelLoopTest test_indextts_batching \
  > $R/tests.log 2>&1; echo "== tests rc=$?"
  grep -B2 -A25 "^FAIL:\|^ERROR:" $R/tests.log | head -80; tail -3 $R/tests.log)
bb() { # name concurrency host-args limit
  timeout $4 python3 bench/gpu/batch_bench.py --stride 4 --concurrency $2 --lines 96 --warm --s2mel-dtype bf16 \
    --host-args="$3" --out $R/$1 --name=-$1 > $R/$1.log 2>&1
  echo "== $1 rc=$?"; tail -4 $R/$1.log | grep "^| [0-9]"
}
bb roll 1,16,16 "--vocoder-fused --s2mel-rolling" 150
bb group 16,16 "--vocoder-fused" 100
bb rollb 16,16 "--vocoder-fused --s2mel-rolling" 100
bb roll64 64 "--vocoder-fused --s2mel-rolling" 90
bb group64 64 "--vocoder-fused" 90
cd $TOP && tar czf res.tgz r && rm -rf r
