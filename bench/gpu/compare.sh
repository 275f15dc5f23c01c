#!/bin/sh
# GPU throughput comparison (issue 7): the source documents' fixed N model hosts
# against dubstudio's executor after its own calibration, on two cards at once: the
# whole of GPU 0, and GPU 1 shrunk to a 24 GiB studio card by a process holding the
# rest. Build on a development machine, then run this on a two-GPU machine from the
# repository root (one GPU: set GPUS=0 and SITUATIONS to one of them):
#
#   mkdir -p .devbin/gpu
#   CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o .devbin/gpu/gpucompare ./bench/gpucompare
#
# METHODS (default fixed,executor), STEPS (the fixed method's host counts; METHODS1
# and STEPS1 for GPU 1 when they differ), LEAVE0 (GiB left on GPU 0; default 0: the
# whole card), LEAVE1 (GiB left on GPU 1; 0: the whole card there too), STRIDE
# (the benchmark host's --decode-stride: the same memory in fewer GPT steps, to fit
# the runs in the time a GPU is lent), LIMIT (seconds per card) and SHARE (1: the
# hosts of each GPU share one copy of the weights, a profile's "share weights", for
# both methods; SHARE0 and SHARE1 per GPU when they differ) can be set.
# OUT (default ./gpu-results) receives OUT0 (GPU 0's folder, default whole) and OUT1
# (GPU 1's, default 24gib), to be named by what they hold: results.json, run.log (the
# summary at its end), hosts.log and the calibration.
set -u
OUT=${OUT:-./gpu-results}
METHODS=${METHODS:-fixed,executor}
STEPS=${STEPS:-1,2,3,4,6,8,12,16}
METHODS1=${METHODS1:-$METHODS}
STEPS1=${STEPS1:-$STEPS}
LEAVE0=${LEAVE0:-0}
LEAVE1=${LEAVE1:-24}
OUT0=${OUT0:-whole}
OUT1=${OUT1:-24gib}
STRIDE=${STRIDE:-4}
LIMIT=${LIMIT:-540}
SHARE=${SHARE:-0}
SHARE0=${SHARE0:-$SHARE}
SHARE1=${SHARE1:-$SHARE}
HOST="tts/hosts/bench_host.py --gpt-dtype fp16 --decode-stride $STRIDE"
share() { [ "$1" = 1 ] && echo -share-weights; }
mkdir -p "$OUT/$OUT0" "$OUT/$OUT1"
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,memory.used --format=csv >"$OUT/$OUT0/run.log" 2>&1
cp "$OUT/$OUT0/run.log" "$OUT/$OUT1/run.log"
.devbin/gpu/gpucompare -gpu 0 -leave-gib "$LEAVE0" -methods "$METHODS" -n "$STEPS" -stop-flat 2 -host "$HOST" $(share "$SHARE0") \
  -timeout "${LIMIT}s" -out "$OUT/$OUT0" >>"$OUT/$OUT0/run.log" 2>&1 &
W=$!
.devbin/gpu/gpucompare -gpu 1 -leave-gib "$LEAVE1" -methods "$METHODS1" -n "$STEPS1" -stop-flat 2 -host "$HOST" $(share "$SHARE1") \
  -timeout "${LIMIT}s" -out "$OUT/$OUT1" >>"$OUT/$OUT1/run.log" 2>&1 &
S=$!
wait $W; rw=$?
wait $S; rs=$?
tail -n 16 "$OUT/$OUT0/run.log" "$OUT/$OUT1/run.log"
[ $rw -eq 0 ] && [ $rs -eq 0 ]
