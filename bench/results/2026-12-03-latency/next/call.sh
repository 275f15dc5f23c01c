#!/bin/bash
# For the next device time (not yet run): latency at 16 in flight with the vocoder fused
# against plain in one call (call C's fused runs at 16 were cut off by their limit), and
# the whole card with s2mel compiled and the vocoder fused against both compiled.
# Carry .devbin/gpu (gpucompare, dubstudio).
TOP=$OUT; R=$TOP/r; mkdir -p $R
source <(sed -n 15,34p bench/gpu/batch_compare.sh)
OUT=$R; LIMIT=200
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 60 python3 -m unittest -v test_batching.BatchingTest.test_the_vocoder_kernel_is_in_the_batch > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/tests.log)
tail -2 $R/tests.log
bb() { # name concurrency [host args]
  timeout 170 python3 bench/gpu/batch_bench.py --stride 4 --concurrency $2 --lines 96 --warm --s2mel-dtype bf16 \
    --host-args="${3:-}" --out $R/$1 --name=-$1 > $R/$1.log 2>&1
  echo "== $1 rc=$?"; tail -4 $R/$1.log | grep "^| 16\|^| 1 "
}
bb plain 1,16,16
bb fused 1,16,16 "--vocoder-fused"
MAXSEQ=128 cmp 0 0 batched128-compiled batched 16 4 150 "--s2mel-dtype bf16 --s2mel-compile --vocoder-compile"
MAXSEQ=128 cmp 0 0 batched128-s2mel-compiled-fused batched 16 4 150 "--s2mel-dtype bf16 --s2mel-compile --vocoder-fused"
cd $TOP && tar czf res.tgz r && rm -rf r
