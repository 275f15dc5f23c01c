#!/bin/bash
# Call 5 (2026-12-07): the card at one commit, if one is lent. Calls 1-4 ran on
# an H100 and are not repeated there: on a card under 100 GB it runs the compiled pairing
# below instead. On an H200, s2mel bf16, stride 4, the film workload, most important
# first (the device time left is short): the fixed N = 16 under MPS (the best pool measured on H200s), the
# batching host at 128 lines, the card shrunk to 24 GiB with the rule's N = 3 and the
# batching host at 64, and the batching host at 128 again.
# Prediction: batched 128 at 2.9-3.3x the MPS pool (3.23x at 85687f5); 24 GiB 4.2-4.8x
# (4.77x at 8d25bc8); no failure or OOM of the batching host.
O=$OUT; R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $R/gpu.txt
MEM=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
source <(sed -n 15,34p bench/gpu/batch_compare.sh)
OUT=$R; LIMIT=110
BF="--s2mel-dtype bf16"
# After each run: its host logs go and the archive is remade, so a call cut off still
# returns what ran.
keep() { rm -f $R/*/hosts.log; tar czf $O/r.tgz -C $O r; }
if [ "$MEM" -lt 100000 ]; then
  # Added 2026-12-07 (second session), before the call: on an H100 the pairing call 3
  # left unfair, compiled on both sides: fixed N = 10 under MPS, then the batching host
  # at 128, each with s2mel's estimator and the vocoder compiled (each of the ten hosts
  # compiles its own). Prediction: the pool gains less than the batching host did
  # (1.27x), as its s2mel runs one line at a time; ratio 2.6-3.0x; no OOM at N = 10.
  C="$BF --s2mel-compile --vocoder-compile"
  nvidia-cuda-mps-control -d; sleep 1
  LIMIT=330 cmp 0 0 fixed10-mps-compiled fixed 10 4 150 "$C"
  echo quit | nvidia-cuda-mps-control; sleep 2
  keep
  LIMIT=200 MAXSEQ=128 cmp 0 0 batched128-compiled batched 8 4 150 "$C"
  keep
  for d in $R/*/run.log; do echo "$d"; grep "^| \(fixed\|batched\) " $d; done
  rm -rf $R; echo "== done"; exit 0
fi
nvidia-cuda-mps-control -d; sleep 1
cmp 0 0 fixed16-mps fixed 16 4 150 "$BF"
echo quit | nvidia-cuda-mps-control; sleep 2
keep
MAXSEQ=128 cmp 0 0 batched128 batched 8 4 150 "$BF"
keep
LIMIT=130 cmp 0 24 24gib-fixed3 fixed 3 4 150 "$BF"
keep
cmp 0 24 24gib-batched64 batched 3 4 150 "$BF"
keep
MAXSEQ=128 cmp 0 0 batched128-2 batched 8 4 150 "$BF"
keep
for d in $R/*/run.log; do echo "$d"; grep "^| \(fixed\|batched\) " $d; done
rm -rf $R
echo "== done"
