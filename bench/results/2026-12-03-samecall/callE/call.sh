#!/bin/bash
# call E: CUDA tests of 79f8c3f (rows sized by the pool, graph keys filtered); whole card,
# in one call: fixed N=16 under MPS, batched 128 and 64, then both again in reverse order;
# nvidia-smi's per-process memory sampled under MPS
TOP=$OUT; R=$TOP/r; mkdir -p $R
source <(sed -n 15,34p bench/gpu/batch_compare.sh)
OUT=$R; LIMIT=150
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 200 python3 -m unittest test_batching test_indextts_batching > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/tests.log)
tail -3 $R/tests.log; grep -E "^(FAIL|ERROR):" $R/tests.log
mps() { # name
  nvidia-cuda-mps-control -d; sleep 1
  (for i in $(seq 1 40); do date +%T; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader; nvidia-smi --query-gpu=memory.used --format=csv,noheader; sleep 3; done) > $R/$1-apps.log 2>&1 &
  S=$!
  cmp 0 0 $1 fixed 16 4 150 "--s2mel-dtype bf16"
  kill $S; echo quit | nvidia-cuda-mps-control; sleep 2
}
mps fixed16-mps-1
MAXSEQ=128 cmp 0 0 batched128-1 batched 16 4 150 "--s2mel-dtype bf16"
cmp 0 0 batched64-1 batched 16 4 150 "--s2mel-dtype bf16"
MAXSEQ=128 cmp 0 0 batched128-2 batched 16 4 150 "--s2mel-dtype bf16"
mps fixed16-mps-2
cd $TOP && tar czf res.tgz r && rm -rf r
