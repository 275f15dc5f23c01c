#!/bin/bash
# call C: the fused anti-aliased activation (alias_free.py, --vocoder-fused): its CUDA
# test, the batching pipeline's CUDA tests (the vocoder's batches per group); then at
# 16 lines in flight over 96 lines, warmed, s2mel groups by frames: --s2mel-waste 0.25
# (the default) plain and with the vocoder fused (alone too, stage costs), 0.1 plain;
# whole card, 128 lines in flight, plain then fused
TOP=$OUT; R=$TOP/r; mkdir -p $R
source <(sed -n 15,34p bench/gpu/batch_compare.sh)
OUT=$R; LIMIT=95
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 110 python3 -m unittest -v test_bench_host.BenchHostTest.test_fused_activation_matches_the_four_steps test_batching.BatchingTest test_batching.CudaGraphTest > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/tests.log)
tail -3 $R/tests.log; grep -E "^(FAIL|ERROR):" $R/tests.log
bb() { # name concurrency [host args] [more]
  timeout 120 python3 bench/gpu/batch_bench.py --stride 4 --concurrency $2 --lines 96 --warm --s2mel-dtype bf16 \
    --host-args="${3:-}" ${4:-} --out $R/$1 --name=-$1 > $R/$1.log 2>&1
  echo "== $1 rc=$?"; grep '"load"' $R/$1.log | cut -c1-400; grep '"stage_costs"' $R/$1.log; tail -3 $R/$1.log | grep "^| 16\|^| 1 "
}
bb fused 1,16,16 "--vocoder-fused" --stage-costs
bb w025 16,16
bb w01 16,16 "--s2mel-waste 0.1"
MAXSEQ=128 cmp 0 0 batched128 batched 16 4 150 "--s2mel-dtype bf16"
MAXSEQ=128 cmp 0 0 batched128-fused batched 16 4 150 "--s2mel-dtype bf16 --vocoder-fused"
cd $TOP && tar czf res.tgz r && rm -rf r
