#!/bin/bash
# call 4 (2026-12-04, second session): the vocoder's stream at the highest priority
# (-2, above the GPT's -1; s2mel 0), the code in .devbin/now, against the code before
# (vocoder 0, .devbin/before: git archive HEAD tts/hosts bench/gpu
# bench/gpucompare/testdata at 245ba4e), alternating in one call: latency at 16 lines in
# flight, 96 lines, warmed, s2mel bf16, the vocoder fused, as calls 1-3. First the
# priorities the device gives and the CUDA s2mel graph test fixed after call 3.
TOP=$OUT; R=$TOP/r; mkdir -p $R
python3 -c "import torch; print('priorities', [torch.cuda.Stream(priority=p).priority for p in (0, -1, -2, -3, -6)])"
(cd .devbin/now/tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 120 python3 -m unittest -v \
  test_batching.CudaGraphTest test_batching.S2MelPreemptionTest > $R/tests.log 2>&1; echo "== tests rc=$?"
  grep -B2 -A25 "^FAIL:\|^ERROR:" $R/tests.log | head -60; tail -3 $R/tests.log)
bb() { # tree name concurrency host-args limit
  (cd .devbin/$1 && timeout $5 python3 bench/gpu/batch_bench.py --stride 4 --concurrency $3 --lines 96 --warm \
    --s2mel-dtype bf16 --host-args="$4" --out $R/$2 --name=-$2 > $R/$2.log 2>&1
  echo "== $2 rc=$?"; tail -4 $R/$2.log | grep "^| 16\|^| 1 ")
}
bb now vprio 1,16,16 "--vocoder-fused" 150
bb before base 16,16 "--vocoder-fused" 140
bb now vpriob 16,16 "--vocoder-fused" 140
bb before baseb 16,16 "--vocoder-fused" 140
cd $TOP && tar czf res.tgz r && rm -rf r
