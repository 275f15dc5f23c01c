#!/bin/bash
# call F: CUDA tests (compiled s2mel and vocoder among them); at 16 lines in flight, where
# the GPU's time goes (torch.profiler, split by launching thread), then the same with
# s2mel's estimator and the vocoder compiled (torch.compile), stage costs alone for each
TOP=$OUT; R=$TOP/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/smi.csv 2>&1
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 150 python3 -m unittest test_batching.CudaGraphTest test_bench_host > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/tests.log)
tail -3 $R/tests.log; grep -E "^(FAIL|ERROR):" $R/tests.log
B=bench/gpu/batch_bench.py
timeout 190 python3 $B --stride 4 --concurrency 1,16 --lines 48 --warm --s2mel-dtype bf16 --stage-costs --profile 16 --out $R/base --name=-base > $R/base.log 2>&1
echo "== base rc=$?"; tail -4 $R/base.log
timeout 220 python3 $B --stride 4 --concurrency 1,16 --lines 48 --warm --s2mel-dtype bf16 --stage-costs --host-args="--s2mel-compile --vocoder-compile" --out $R/comp --name=-compiled > $R/comp.log 2>&1
echo "== compiled rc=$?"; tail -4 $R/comp.log
cd $TOP && tar czf res.tgz r && rm -rf r
