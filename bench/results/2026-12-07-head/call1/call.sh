#!/bin/bash
# Call 1 (written 2026-12-06, run 2026-12-07): issue 15's headline at one commit (HEAD, 112b775), whole card,
# stride 4, the 150-line film workload, s2mel bf16 (graphs on, the default with bf16),
# the vocoder as the hosts' default (plain): the CUDA graph tests of HEAD; the fixed
# N = 8; the batching host at 64 and 128 lines in flight; under MPS the fixed N = 16
# and 18 (8 and 10 where the card has 80 GB); the batching host at 128 again, to see
# the order's effect. Run from the repository root with gpucompare in .devbin/gpu.
# Prediction: batched 64 and 128 at 3.2-3.6x the fixed N = 8 and 2.7-3.2x the best
# MPS figure, as at 8d25bc8 and 85687f5; no failure, no OOM.
R=$OUT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $R/gpu.txt
MEM=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 100 python3 -m unittest -v test_batching.CudaGraphTest > $R/tests.log 2>&1; echo "== tests rc=$?"; tail -3 $R/tests.log)
source <(sed -n 15,34p bench/gpu/batch_compare.sh)
OUT=$R; LIMIT=110
BF="--s2mel-dtype bf16"
mps() { # name n
  nvidia-cuda-mps-control -d; sleep 1
  cmp 0 0 $1 fixed $2 4 150 "$BF"
  echo quit | nvidia-cuda-mps-control; sleep 2
}
cmp 0 0 fixed8 fixed 8 4 150 "$BF"
cmp 0 0 batched64 batched 8 4 150 "$BF"
MAXSEQ=128 cmp 0 0 batched128 batched 8 4 150 "$BF"
if [ "$MEM" -gt 100000 ]; then A=16; B=18; else A=8; B=10; fi
mps fixed$A-mps $A
mps fixed$B-mps $B
MAXSEQ=128 cmp 0 0 batched128-2 batched 8 4 150 "$BF"
for d in $R/*/run.log; do echo "$d"; grep "^| \(fixed\|batched\) " $d; done
echo "== done"
