#!/bin/sh
# Issue 15's comparison on two GPUs of one machine at once, each method after the other
# on the same card: the fixed pool of the source documents' rule against the batching
# host, stride 4 and stride 1, on the whole card (GPU 0) and on a card shrunk to 24 GiB
# (GPU 1); then, on GPU 1 once its card is whole again, the batching host's latency and
# s2mel precision (batch_bench.py). Build gpucompare first (see compare.sh), then run
# from the repository root:  OUT=./out bench/gpu/batch_compare.sh
# LIMIT (seconds per gpucompare, default 260), LINES1 (stride-1 lines, default 40) and
# FIXED0/FIXED1 (fixed host counts, defaults 8 and 3: the whole card's best and the
# rule's N for 24 GiB) can be set.
set -u
OUT=${OUT:-./gpu-results}
LIMIT=${LIMIT:-260}
LINES1=${LINES1:-40}
FIXED0=${FIXED0:-8}
FIXED1=${FIXED1:-3}
G=.devbin/gpu/gpucompare
H="tts/hosts/bench_host.py --gpt-dtype fp16"
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,memory.used --format=csv >"$OUT/nvidia-smi.csv" 2>&1
cmp() { # gpu leave name methods n stride lines [host flags]
  d="$OUT/$3"; mkdir -p "$d"
  $G -gpu "$1" -leave-gib "$2" -methods "$4" -n "$5" -lines "$7" -max-sequences 64 -beams 3 \
    -host "$H --decode-stride $6 ${8:-}" -timeout "${LIMIT}s" -out "$d" >"$d/run.log" 2>&1
  echo "== $3 rc=$?"; grep -E "audio s/s" "$d/run.log" | sed 's/^/   /'
}
(
  cmp 0 0 whole-s4 fixed,batched "$FIXED0" 4 150
  cmp 0 0 whole-s4-bf16 batched "$FIXED0" 4 150 "--s2mel-dtype bf16"
  cmp 0 0 whole-s1 fixed,batched "$FIXED0" 1 "$LINES1"
) >"$OUT/gpu0.log" 2>&1 &
A=$!
(
  cmp 1 24 24gib-s4 fixed,batched "$FIXED1" 4 150
  cmp 1 24 24gib-s4-bf16 batched "$FIXED1" 4 150 "--s2mel-dtype bf16"
  CUDA_VISIBLE_DEVICES=1 timeout 200 python3 bench/gpu/batch_bench.py --stride 4 --concurrency 16,64 --baseline 20 \
    --precision --out "$OUT/batch-bench" --name=-latency >"$OUT/batch-bench.log" 2>&1
  echo "== batch_bench rc=$?"; tail -n 5 "$OUT/batch-bench.log"
) >"$OUT/gpu1.log" 2>&1 &
B=$!
wait $A; wait $B
cat "$OUT/gpu0.log" "$OUT/gpu1.log"
