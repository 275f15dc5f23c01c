#!/bin/sh
# Issue 15, item 3: calibrate the benchmark model's batching host (bench_host.py --batch,
# IndexTTS-2 shapes, random weights) on one GPU with `dubstudio calibrate -batching`:
# memory after load and the KV pool, each length's KV and activation bytes (alone,
# three runs each), lines at once 1, 2, 4, ... up to MAXSEQ or the lines the pool
# holds, until a step gains under 5%; the latency point (a line over 3 times as slow
# per audio second as alone) and the recommended maximum sequences. Meant to fit in
# five minutes on an H200 at stride 4 (not yet run there); a run cut off by LIMIT keeps
# the steps it finished. Build on a development machine:
#
#   mkdir -p .devbin/gpu
#   CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o .devbin/gpu/dubstudio ./cmd/dubstudio
#
# then run from the repository root on the GPU machine (python3 with torch):
#
#   OUT=./out bench/gpu/calibrate_batching.sh
#
# OUT (default ./gpu-results) receives calibration-batching.json (the whole result,
# as the admin page stores it), summary.txt (the tables), samples.json (NVML once a
# second), run.log (progress and the host's log) and nvidia-smi.csv. GPU (index,
# default 0), MAXSEQ (the host's maximum sequences, default 64), BEAMS (3), STRIDE
# (the host's --decode-stride, default 4), MAXGEN (longest line, default 30 s),
# BUCKETS (default 2,6,12 and MAXGEN), PERSTEP (lines per step at least, default 8),
# S2MEL (the profile's s2mel precision, fp32 or bf16, default fp32) and LIMIT
# (seconds, default 290) can be set.
set -u
OUT=${OUT:-./gpu-results}
GPU=${GPU:-0}
MAXSEQ=${MAXSEQ:-64}
BEAMS=${BEAMS:-3}
STRIDE=${STRIDE:-4}
MAXGEN=${MAXGEN:-30}
BUCKETS=${BUCKETS:-2,6,12,$MAXGEN}
PERSTEP=${PERSTEP:-8}
LIMIT=${LIMIT:-290}
S2MEL=${S2MEL:-fp32}
D=.devbin/gpu/dubstudio
mkdir -p "$OUT"
if [ ! -x "$D" ]; then
  echo "no $D: build it first (see the top of $0)" >&2
  exit 2
fi
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,memory.used --format=csv >"$OUT/nvidia-smi.csv" 2>&1
export BENCH_DECODE_STRIDE="$STRIDE" DUBSTUDIO_HOSTS_DIR="${DUBSTUDIO_HOSTS_DIR:-tts/hosts}" HOST_PYTHON="${HOST_PYTHON:-python3}"
timeout $((LIMIT + 30)) "$D" calibrate -engine bench -db=false -gpu "$GPU" -batching -concurrency "$MAXSEQ" \
  -beams "$BEAMS" -s2mel-precision "$S2MEL" -max-gen "$MAXGEN" -long-threshold "$MAXGEN" -buckets "$BUCKETS" -lines-per-step "$PERSTEP" \
  -timeout "${LIMIT}s" -out "$OUT/calibration-batching.json" -samples-out "$OUT/samples.json" \
  >"$OUT/summary.txt" 2>"$OUT/run.log"
rc=$?
echo "== calibrate_batching rc=$rc"
tail -n 30 "$OUT/summary.txt"
[ $rc -eq 0 ] || tail -n 20 "$OUT/run.log"
exit $rc
