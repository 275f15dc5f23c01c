#!/bin/sh
# Issue 15's comparison on one GPU, each method after the other on the same card: the
# fixed pool of the source documents' rule against the batching host. Part "whole":
# stride 4 on the whole card, then the batching host's latency and s2mel precision
# (batch_bench.py); part "24gib": stride 4 on the card shrunk to 24 GiB, then stride 1
# on the whole card; part "latency": s2mel in bf16 at 32 lines at once, and each line
# alone. Each part fits in ten minutes. Build gpucompare first (see
# compare.sh), then run from the repository root:
#   OUT=./out bench/gpu/batch_compare.sh whole|24gib|latency|all, or graphs|graphs-whole
# (CUDA graphs against kernel-by-kernel launches, on 24 GiB and on the whole card) or
# s2mel-sweep (latency at load against s2mel's group size)
# LIMIT (seconds per gpucompare, default 260), LINES1 (stride-1 lines, default 30) and
# FIXED0/FIXED1 (fixed host counts, defaults 8 and 3: the whole card's best and the
# rule's N for 24 GiB), MAXSEQ (the batching host's lines at once, 64) and BEAMS (3) can be set.
set -u
OUT=${OUT:-./gpu-results}
LIMIT=${LIMIT:-260}
LINES1=${LINES1:-30}
FIXED0=${FIXED0:-8}
FIXED1=${FIXED1:-3}
GPU=${GPU:-0}
G=.devbin/gpu/gpucompare
H="tts/hosts/bench_host.py --gpt-dtype fp16"
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,memory.used --format=csv >"$OUT/nvidia-smi.csv" 2>&1
cmp() { # gpu leave name methods n stride lines [host flags]
  d="$OUT/$3"; mkdir -p "$d"
  # The batching host's s2mel precision is its profile's (-s2mel): the worker passes it
  # after the -host flags, so a --s2mel-dtype there alone would be overridden.
  s2=fp32; case "${8:-}" in *"--s2mel-dtype bf16"*) s2=bf16 ;; esac
  $G -gpu "$1" -leave-gib "$2" -methods "$4" -n "$5" -lines "$7" -max-sequences "${MAXSEQ:-64}" -beams "${BEAMS:-3}" -s2mel $s2 \
    -host "$H --decode-stride $6 ${8:-}" -timeout "${LIMIT}s" -out "$d" >"$d/run.log" 2>&1
  echo "== $3 rc=$?"; grep -E "audio s/s" "$d/run.log" | sed 's/^/   /'
}
case "${1:-all}" in
  whole|all)
    cmp $GPU 0 whole-s4 fixed,batched "$FIXED0" 4 150
    cmp $GPU 0 whole-s4-bf16 batched "$FIXED0" 4 150 "--s2mel-dtype bf16"
    CUDA_VISIBLE_DEVICES=$GPU timeout 220 python3 bench/gpu/batch_bench.py --stride 4 --concurrency 16,64 \
      --baseline 20 --precision --out "$OUT/batch-bench" --name=-latency >"$OUT/batch-bench.log" 2>&1
    echo "== batch_bench rc=$?"; tail -n 5 "$OUT/batch-bench.log" ;;
esac
case "${1:-all}" in
  24gib|all)
    cmp $GPU 24 24gib-s4 fixed,batched "$FIXED1" 4 150
    cmp $GPU 24 24gib-s4-bf16 batched "$FIXED1" 4 150 "--s2mel-dtype bf16"
    cmp $GPU 0 whole-s1 fixed,batched "$FIXED0" 1 "$LINES1"
    CUDA_VISIBLE_DEVICES=$GPU timeout 150 python3 bench/gpu/batch_bench.py --stride 4 --concurrency 16,32 \
      --baseline 12 --s2mel-dtype bf16 --out "$OUT/batch-bench" --name=-latency-bf16 >"$OUT/batch-bench-bf16.log" 2>&1
    echo "== batch_bench bf16 rc=$?"; tail -n 4 "$OUT/batch-bench-bf16.log" ;;
esac
case "${1:-all}" in
  graphs) # the decode step's CUDA graphs against kernel-by-kernel launches, with the
    # rule's fixed N = 3 beside them, all on the card shrunk to 24 GiB, s2mel in bf16
    cmp $GPU 24 24gib-s4-bf16-fixed fixed "$FIXED1" 4 150 "--s2mel-dtype bf16"
    cmp $GPU 24 24gib-s4-bf16-graphs batched "$FIXED1" 4 150 "--s2mel-dtype bf16"
    cmp $GPU 24 24gib-s4-bf16-eager batched "$FIXED1" 4 150 "--s2mel-dtype bf16 --no-decode-graphs"
    BEAMS=1 cmp $GPU 24 24gib-s4-bf16-graphs-1beam batched "$FIXED1" 4 150 "--s2mel-dtype bf16" ;;
esac
case "${1:-all}" in
  graphs-whole) # the same on the whole card, the best fixed N = 8 beside them; then each line alone
    cmp $GPU 0 whole-s4-bf16-fixed fixed "$FIXED0" 4 150 "--s2mel-dtype bf16"
    cmp $GPU 0 whole-s4-bf16-graphs batched "$FIXED0" 4 150 "--s2mel-dtype bf16"
    cmp $GPU 0 whole-s4-graphs batched "$FIXED0" 4 150
    CUDA_VISIBLE_DEVICES=$GPU timeout 120 python3 bench/gpu/batch_bench.py --stride 4 --concurrency 1 --lines 40 \
      --s2mel-dtype bf16 --out "$OUT/batch-bench" --name=-alone-graphs >"$OUT/batch-bench-alone-graphs.log" 2>&1
    echo "== batch_bench alone graphs rc=$?"; tail -n 2 "$OUT/batch-bench-alone-graphs.log" ;;
esac
case "${1:-all}" in
  s2mel-sweep) # latency at load against s2mel's group size: each line alone, then 16 in
    # flight with groups of 4, 8 and 16 lines, the first 40 lines, all graphs, bf16
    for g in 1:16 16:4 16:8 16:16; do
      c=${g%%:*}; s=${g##*:}
      CUDA_VISIBLE_DEVICES=$GPU timeout 100 python3 bench/gpu/batch_bench.py --stride 4 --concurrency "$c" --lines 40 \
        --s2mel-dtype bf16 --host-args="--s2mel-graphs --s2mel-batch $s" --out "$OUT/batch-bench" \
        --name="-c$c-group$s" >"$OUT/batch-bench-c$c-group$s.log" 2>&1
      echo "== C $c, s2mel groups of $s rc=$?"; tail -n 1 "$OUT/batch-bench-c$c-group$s.log"
    done ;;
esac
case "${1:-all}" in
  latency|all) # s2mel in bf16 at 32 lines at once, and each line alone (C = 1) for the latency ratio
    MAXSEQ=32 cmp $GPU 0 whole-s4-bf16-32 batched 1 4 150 "--s2mel-dtype bf16"
    MAXSEQ=32 cmp $GPU 24 24gib-s4-bf16-32 batched 1 4 150 "--s2mel-dtype bf16"
    MAXSEQ=32 cmp $GPU 0 whole-s1-bf16-32 batched 1 1 "$LINES1" "--s2mel-dtype bf16"
    for dt in fp32 bf16; do
      CUDA_VISIBLE_DEVICES=$GPU timeout 120 python3 bench/gpu/batch_bench.py --stride 4 --concurrency 1 --lines 40 \
        --s2mel-dtype $dt --out "$OUT/batch-bench" --name=-alone-$dt >"$OUT/batch-bench-alone-$dt.log" 2>&1
      echo "== batch_bench alone $dt rc=$?"; tail -n 2 "$OUT/batch-bench-alone-$dt.log"
    done ;;
esac
