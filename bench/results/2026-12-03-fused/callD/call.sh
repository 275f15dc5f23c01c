#!/bin/bash
# call D: s2mel graph buckets of lines 1,2,3,4,6,8,12,16 against powers of two (HEAD), whole card, 128 lines
TOP=$OUT; R=$TOP/r; mkdir -p $R
source <(sed -n 15,34p bench/gpu/batch_compare.sh)
OUT=$R; LIMIT=100
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 80 python3 -m unittest test_batching.CudaGraphTest > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/tests.log)
tail -3 $R/tests.log
H="$(pwd)/.devbin/gpu/old/tts/hosts/bench_host.py --gpt-dtype fp16"
MAXSEQ=128 cmp 0 0 batched128-pow2 batched 16 4 150 "--s2mel-dtype bf16"
H="tts/hosts/bench_host.py --gpt-dtype fp16"
MAXSEQ=128 cmp 0 0 batched128-lines batched 16 4 150 "--s2mel-dtype bf16"
cd $TOP && tar czf res.tgz r && rm -rf r
