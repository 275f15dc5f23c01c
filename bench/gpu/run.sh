#!/bin/sh
# GPU proof: what NVML sees, the monitor's tests on the real driver, and a calibration
# of the random-weight IndexTTS-2-shaped host (tts/hosts/bench_host.py), without a
# database. Build on a development machine, then run this on the GPU machine from the
# repository root with the binaries in .devbin/gpu (ignored by git):
#
#   mkdir -p .devbin/gpu
#   CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o .devbin/gpu/dubstudio ./cmd/dubstudio
#   CGO_ENABLED=1 go test -c -trimpath -ldflags="-s -w" -o .devbin/gpu/gpu.test ./gpu/
#   CGO_ENABLED=1 go test -c -trimpath -ldflags="-s -w" -o .devbin/gpu/fleet.test ./fleet/
#
# OUT (default ./gpu-results) receives the readings; docs/benchmarks.md has the
# figures of 2026-11-29 on an H200 and bench/gpu/results/ the files they come from.
# MAX_CONCURRENCY bounds the load test (the first run used 3, the second 8).
set -u
OUT=${OUT:-./gpu-results}
MAX_CONCURRENCY=${MAX_CONCURRENCY:-8}
mkdir -p "$OUT"
(date -u; nvidia-smi
 nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,memory.used,utilization.gpu,temperature.gpu,power.draw --format=csv
 uname -r; python3 -c 'import torch; print(torch.__version__, torch.version.cuda)') >"$OUT/smi.txt" 2>&1
.devbin/gpu/dubstudio gpus >"$OUT/gpus.json" 2>&1
.devbin/gpu/gpu.test -test.run 'TestNewMonitorOnThisMachine|TestNVML' -test.v >"$OUT/monitor_test.txt" 2>&1
# the worker's GPUs (fleet): three bench hosts, mixed lengths, NVML against the budget
[ -x .devbin/gpu/fleet.test ] && DUBSTUDIO_GPU_TEST=1 DUBSTUDIO_HOSTS_DIR=tts/hosts OUT="$OUT" \
  .devbin/gpu/fleet.test -test.run TestGPUsOnARealGPU -test.v -test.timeout 300s >"$OUT/gpus_test.txt" 2>&1
# nvidia-smi's view of the hosts' memory, to compare with the monitor's
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader -l 2 >"$OUT/smi_apps.csv" 2>&1 &
SMI=$!
DUBSTUDIO_HOSTS_DIR=tts/hosts HOST_PYTHON=python3 LOG_LEVEL=info \
  .devbin/gpu/dubstudio calibrate -engine bench -db=false -max-gen 10 -long-threshold 8 -buckets 2,5,10 \
  -max-concurrency "$MAX_CONCURRENCY" -lines-per-step 8 -timeout 380s \
  -out "$OUT/calibration.json" -samples-out "$OUT/samples.json" >"$OUT/calibrate.txt" 2>"$OUT/calibrate.log"
rc=$?
kill $SMI 2>/dev/null
cat "$OUT/calibrate.txt"
exit $rc
