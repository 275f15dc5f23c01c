#!/bin/bash
# Call 2 (written 2026-12-06, run 2026-12-07): the rest of issue 15's table at HEAD (112b775): the whole card
# with s2mel in fp32 (IndexTTS-2's precision), the fixed N = 8 against the batching host
# at 128 lines in flight; the card shrunk to 24 GiB, s2mel bf16, the rule's fixed N = 3
# against the batching host at 64; stride 1 (the real model's step count), 30 lines,
# s2mel bf16, the fixed N = 8 against the batching host at 64. The vocoder plain (the
# hosts' default) throughout. Run from the repository root, gpucompare in .devbin/gpu.
# Prediction: fp32 2.0-2.3x (2.05x plain at 2026-12-03); 24 GiB 4-5x (4.77x); stride 1
# 6-7x (6.8x); no failure, no OOM.
O=$OUT; R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $R/gpu.txt
source <(sed -n 15,34p bench/gpu/batch_compare.sh)
OUT=$R; LIMIT=130
BF="--s2mel-dtype bf16"
cmp 0 0 fp32-fixed8 fixed 8 4 150
MAXSEQ=128 cmp 0 0 fp32-batched128 batched 8 4 150
LIMIT=150 cmp 0 24 24gib-fixed3 fixed 3 4 150 "$BF"
cmp 0 24 24gib-batched64 batched 3 4 150 "$BF"
cmp 0 0 s1-fixed8 fixed 8 1 30 "$BF"
cmp 0 0 s1-batched64 batched 8 1 30 "$BF"
for d in $R/*/run.log; do echo "$d"; grep "^| \(fixed\|batched\) " $d; done
echo "== done"
# (As run on 2026-12-07 this line read $OUT, which the sourced lines had set to $R: the tar
# failed and only the first eight files came back.)
tar czf $O/r.tgz -C $O r && rm -rf $O/r
