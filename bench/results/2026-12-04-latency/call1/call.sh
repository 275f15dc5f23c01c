#!/bin/bash
# call 1 (2026-12-04): latency at 16 lines in flight, 96 lines, warmed, s2mel bf16, the
# vocoder fused (a line alone too) then plain, one after the other, with every line's
# stages (call D of 2026-12-03 measured the fused host but its files did not come back);
# then the whole card in fp32 (IndexTTS-2's precision), the fixed N = 8 and the batching
# host at 128 lines in flight, both with the vocoder fused. Runs the code of the commit
# in .devbin/now (git archive HEAD tts/hosts bench/gpu bench/gpucompare/testdata), with
# gpucompare in .devbin/gpu; carry both.
TOP=$OUT; R=$TOP/r; mkdir -p $R
G0=$PWD/.devbin/gpu/gpucompare
cd .devbin/now
source <(sed -n 15,34p bench/gpu/batch_compare.sh)
G=$G0; OUT=$R; LIMIT=200
bb() { # name concurrency host-args limit
  timeout $4 python3 bench/gpu/batch_bench.py --stride 4 --concurrency $2 --lines 96 --warm --s2mel-dtype bf16 \
    --host-args="$3" --out $R/$1 --name=-$1 > $R/$1.log 2>&1
  echo "== $1 rc=$?"; tail -4 $R/$1.log | grep "^| 16\|^| 1 "
}
bb fused 1,16,16 "--vocoder-fused" 150
bb plain 16,16 "" 140
MAXSEQ=128 cmp 0 0 whole-fp32-fused fixed,batched 8 4 150 "--vocoder-fused"
cd $TOP && tar czf res.tgz r && rm -rf r
