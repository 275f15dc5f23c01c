#!/bin/bash
# Call 4 (2026-12-07, the same warm H100): the fixed N = 10 under MPS with the vocoder
# fused too, so that call 3's fused batching host meets a pool with the same vocoder.
# Run as one command line, written here after the run; no prediction was written before it.
R=$OUT; source <(sed -n 15,34p bench/gpu/batch_compare.sh); OUT=$R; LIMIT=150
nvidia-cuda-mps-control -d; sleep 1
cmp 0 0 fixed10-mps-fused fixed 10 4 150 "--s2mel-dtype bf16 --vocoder-fused"
echo quit | nvidia-cuda-mps-control; sleep 2
for d in $R/*/run.log; do grep "^| fixed " $d; done; rm -f $R/*/hosts.log; echo "== done"
