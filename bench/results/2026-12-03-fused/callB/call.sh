#!/bin/bash
# call B: CUDA tests; GPT step old (HEAD~) vs new in one call; whole card: fixed N=16 under MPS, batched old and new
TOP=$OUT; R=$TOP/r; mkdir -p $R
source <(sed -n 15,34p bench/gpu/batch_compare.sh)
OUT=$R; LIMIT=200
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 200 python3 -m unittest test_batching test_indextts_batching > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/tests.log)
tail -3 $R/tests.log; grep -E "^(FAIL|ERROR):" $R/tests.log
for v in old new; do
  B=bench/gpu/batch_bench.py; [ $v = old ] && B=.devbin/gpu/old/bench/gpu/batch_bench.py
  timeout 120 python3 $B --stride 4 --concurrency 1,16,48 --lines 48 --warm --s2mel-dtype bf16 --out $R/b --name=-$v > $R/lat-$v.log 2>&1
  echo "== $v rc=$?"; tail -4 $R/lat-$v.log
done
nvidia-cuda-mps-control -d; sleep 1
cmp 0 0 fixed16-mps fixed 16 4 150 "--s2mel-dtype bf16"
echo quit | nvidia-cuda-mps-control; sleep 2
H="$(pwd)/.devbin/gpu/old/tts/hosts/bench_host.py --gpt-dtype fp16"
cmp 0 0 batched-old batched 16 4 150 "--s2mel-dtype bf16"
H="tts/hosts/bench_host.py --gpt-dtype fp16"
cmp 0 0 batched-new batched 16 4 150 "--s2mel-dtype bf16"
MAXSEQ=128 cmp 0 0 batched128-new batched 16 4 150 "--s2mel-dtype bf16"
cd $TOP && tar czf res.tgz r && rm -rf r
