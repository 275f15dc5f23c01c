#!/bin/bash
# Call 6 (2026-12-07, third session): call 5's H200 plan, which has never run, at HEAD
# (the hosts and the batching core unchanged since 097ee89; only studio and web code
# since). On an H100 the hosts' Python tests on CUDA alone (test_batching,
# test_indextts_batching, test_bench_host): its comparison is calls 1-5. On a card of
# 100 GB or more (the H200), the graph tests, then call5/call.sh itself, whose
# H200 branch runs: s2mel bf16, stride 4, the film workload, the fixed N = 16 under MPS,
# the batching host at 128 lines, the card shrunk to 24 GiB with the rule's N = 3 and
# the batching host at 64, and the batching host at 128 again.
# Prediction: tests OK; batched 128 at 2.9-3.3x the MPS pool (3.23x at 85687f5); 24 GiB
# 4.2-4.8x (4.77x at 8d25bc8); no failure or OOM of the batching host.
O=$OUT; R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $R/gpu.txt
MEM=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
if [ "$MEM" -lt 100000 ]; then
  (cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 400 python3 -m unittest test_batching test_indextts_batching test_bench_host > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/tests.log)
  tail -4 $R/tests.log; echo "== done (not an H200: tests only)"; exit 0
fi
# On the H200 the graph tests alone: the runs need the rest of the call's ten minutes.
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 80 python3 -m unittest test_batching.CudaGraphTest > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/tests.log)
tail -3 $R/tests.log
# Then call 5's H200 plan as written there: on this card its H200 branch runs.
exec bash bench/results/2026-12-07-head/call5/call.sh
