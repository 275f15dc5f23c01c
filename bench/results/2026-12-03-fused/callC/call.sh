#!/bin/bash
# call C: whole card batched 128 again; s2mel groups of 32 at 64 and 128 sequences; 192 sequences
TOP=$OUT; R=$TOP/r; mkdir -p $R
source <(sed -n 15,34p bench/gpu/batch_compare.sh)
OUT=$R; LIMIT=120
MAXSEQ=128 cmp 0 0 batched128 batched 16 4 150 "--s2mel-dtype bf16"
MAXSEQ=128 cmp 0 0 batched128-s2b32 batched 16 4 150 "--s2mel-dtype bf16 --s2mel-batch 32"
cmp 0 0 batched64-s2b32 batched 16 4 150 "--s2mel-dtype bf16 --s2mel-batch 32"
MAXSEQ=192 cmp 0 0 batched192-s2b32 batched 16 4 150 "--s2mel-dtype bf16 --s2mel-batch 32"
cd $TOP && tar czf res.tgz r && rm -rf r
