#!/bin/bash
# call A: every CUDA test of the batching host (the fixed PagedAttentionTest fixture,
# CompiledStagesTest's check that nothing compiles in service, test_bench_host with
# room); then the plain host at 1 and 16 lines in flight over 96 lines, warmed, with
# every line's stages (per_line): where a short line's time goes at load
TOP=$OUT; R=$TOP/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/smi.csv 2>&1
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 330 python3 -m unittest test_batching test_indextts_batching test_bench_host > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/tests.log)
tail -3 $R/tests.log; grep -E "^(FAIL|ERROR):" $R/tests.log
timeout 230 python3 bench/gpu/batch_bench.py --stride 4 --concurrency 1,16,16 --lines 96 --warm --s2mel-dtype bf16 --out $R/base --name=-base > $R/base.log 2>&1
echo "== base rc=$?"; tail -6 $R/base.log
cd $TOP && tar czf res.tgz r && rm -rf r
