#!/bin/bash
# Call 1 (2026-12-06): the express lane (--s2mel-express 5: lines up to 5 s, and
# first lines, run s2mel and the vocoder on a second thread whose streams go before the
# first's) against one s2mel thread, alternating on one card, 96 lines of the film
# workload, warmed, stride 4, s2mel bf16 with graphs, the vocoder fused. First the CUDA
# tests of what changed (the lanes, each with a table of its own).
# Prediction: at 16 in flight a short line's s2mel wait (0.3 s) goes and its s2mel
# falls towards alone's (0.07 s against 0.33), so p95 of lines up to 5 s falls from
# about 1.5 s to under 0.8 s (3x a line alone); throughput falls by less than 10%
# (groups smaller). At 64 the GPT's own step (0.48 s for a short line) keeps it above.
TOP=$OUT; R=$TOP/r; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $R/gpu.txt
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 170 python3 -m unittest -v test_batching.S2MelLoopTest \
  test_batching.CudaGraphTest test_batching.BatchingTest.test_short_and_first_lines_take_the_express_lane \
  test_indextts_batching > $R/tests.log 2>&1; echo "== tests rc=$?"; tail -3 $R/tests.log)
bb() { # name concurrency lines limit host-args
  local name=$1 c=$2 n=$3 limit=$4 host=$5
  timeout $limit python3 bench/gpu/batch_bench.py --stride 4 --concurrency $c --lines $n --warm \
    --s2mel-dtype bf16 --host-args="$host" --out $R/$name --name=-$name > $R/$name.log 2>&1
  echo "== $name rc=$?"; grep "^| [0-9]" $R/$name.log | tail -2
}
bb alone 1 48 75 "--vocoder-fused"
for i in 1 2; do
  bb none16-$i 16 96 60 "--vocoder-fused"
  bb x5-16-$i 16 96 60 "--vocoder-fused --s2mel-express 5"
done
bb none64 64 96 55 "--vocoder-fused"
bb x5-64 64 96 55 "--vocoder-fused --s2mel-express 5"
echo "== done"
