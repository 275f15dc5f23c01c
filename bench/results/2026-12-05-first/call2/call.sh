#!/bin/bash
# call 2 (2026-12-05, third session): call 1 again, since call 1's files did not come
# back to the repository, and a few retakes at 64 in flight. First the CUDA tests of the
# s2mel table and loop (rows set aside and seated again, with graphs), then batch_bench,
# warmed, s2mel bf16 with graphs, the vocoder fused:
# - an editor's retakes: every 8th line first (12 of 96 lines, 8 of them up to 5 s),
#   1 in flight (alone), 16 twice and 64, against the same with no line first;
# - priority by length: every line up to 5 s first (66 of 96), 16 twice and 64;
# - a few retakes: every 32nd line first (3 of 96) at 64, what a studio's editors send
#   beside a script's render more nearly than one line in eight.
# Runs the code in .devbin/now (git archive HEAD tts/hosts bench/gpu
# bench/gpucompare/testdata gpu/profile.go).
TOP=$OUT; R=$TOP/r; mkdir -p $R
cd .devbin/now
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $R/gpu.txt
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 150 python3 -m unittest -v \
  test_batching.CudaGraphTest test_batching.BatchingTest test_batching.S2MelLoopTest test_indextts_batching \
  > $R/tests.log 2>&1; echo "== tests rc=$?"
  grep -B2 -A25 "^FAIL:\|^ERROR:" $R/tests.log | head -60; tail -3 $R/tests.log)
bb() { # name concurrency limit batch_bench-args...
  local name=$1 c=$2 limit=$3; shift 3
  timeout $limit python3 bench/gpu/batch_bench.py --stride 4 --concurrency $c --lines 96 --warm --s2mel-dtype bf16 \
    --host-args="--vocoder-fused" "$@" --out $R/$name --name=-$name > $R/$name.log 2>&1
  echo "== $name rc=$?"; grep "^| [0-9]" $R/$name.log | tail -6
}
bb first 1,16,16 130 --first-every 8
bb none 16,16 70
bb upto5 16,16 70 --first-upto 5
bb first64 64 50 --first-every 8
bb none64 64 50
bb upto64 64 50 --first-upto 5
bb few64 64 50 --first-every 32
cd $TOP && tar czf res.tgz r && rm -rf r
