#!/bin/bash
# Call 3 (2026-12-07, on the H100 calls 1 and 2 ran on, still warm): the batching host at
# 128 lines in flight with the vocoder fused (--vocoder-fused), then with s2mel's
# estimator and the vocoder compiled (--s2mel-compile --vocoder-compile), both s2mel
# bf16, to set beside call 1's fixed N = 10 under MPS (19.16 audio s/s, same machine).
# Run as one command line, written here after the run; no prediction was written before it.
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
source <(sed -n 15,34p bench/gpu/batch_compare.sh); OUT=$R; LIMIT=230
MAXSEQ=128 cmp 0 0 b128-fused batched 8 4 150 "--s2mel-dtype bf16 --vocoder-fused"
MAXSEQ=128 cmp 0 0 b128-compiled batched 8 4 150 "--s2mel-dtype bf16 --s2mel-compile --vocoder-compile"
for d in $R/*/run.log; do echo $d; grep "^| batched " $d; done; rm -f $R/*/hosts.log; echo "== done"
