#!/bin/bash
# call G: CUDA tests (GraphCache's warm-up before every capture when asked; the compiled
# s2mel and vocoder in a run of their own); whole card, 128 lines in flight, s2mel bf16:
# plain, then with s2mel's estimator and the vocoder compiled
TOP=$OUT; R=$TOP/r; mkdir -p $R
source <(sed -n 15,34p bench/gpu/batch_compare.sh)
OUT=$R; LIMIT=200
cd tts/hosts
BATCHING_TEST_DEVICE=cuda timeout 140 python3 -m unittest test_batching.BatchingTest test_batching.SampleTokensTest test_batching.CudaGraphTest test_batching.PagedAttentionTest test_batching.SMPartitionTest test_indextts_batching test_bench_host > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/tests.log
BATCHING_TEST_DEVICE=cuda timeout 200 python3 -m unittest -v test_batching.CompiledStagesTest > $R/tests-compiled.log 2>&1; echo "tests rc=$?" >> $R/tests-compiled.log
cd ../..
tail -3 $R/tests.log $R/tests-compiled.log; grep -E "^(FAIL|ERROR):" $R/tests*.log
MAXSEQ=128 cmp 0 0 batched128 batched 16 4 150 "--s2mel-dtype bf16"
TORCH_LOGS=recompiles MAXSEQ=128 cmp 0 0 batched128-compiled batched 16 4 150 "--s2mel-dtype bf16 --s2mel-compile --vocoder-compile"
cd $TOP && tar czf res.tgz r && rm -rf r
