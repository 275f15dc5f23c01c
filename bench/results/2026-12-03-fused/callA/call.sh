#!/bin/bash
# call A: CUDA tests of the fused beam selection, then the GPT step old (HEAD) vs new, same call
TOP=$OUT; R=$TOP/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/smi.csv 2>&1
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 200 python3 -m unittest test_batching test_indextts_batching > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/tests.log)
tail -4 $R/tests.log
for v in old new; do
  B=bench/gpu/batch_bench.py; [ $v = old ] && B=.devbin/gpu/old/bench/gpu/batch_bench.py
  timeout 150 python3 $B --stride 4 --concurrency 1,16 --warm --s2mel-dtype bf16 --out $R/b-$v --name=-$v > $R/lat-$v.log 2>&1
  echo "== $v rc=$?"; tail -3 $R/lat-$v.log
done
cd $TOP && tar czf res.tgz r && rm -rf r
