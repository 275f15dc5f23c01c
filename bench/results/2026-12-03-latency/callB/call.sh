#!/bin/bash
# call B: s2mel's groups by frames (the prompt's and the line's; --s2mel-waste) and the
# vocoder in batches of about one length, the shortest first, against the code before
# (.devbin/old: HEAD before the change, carried), 96 lines at 16 in flight, warmed,
# one after the other on the same card; the new code alone too
TOP=$OUT; R=$TOP/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/smi.csv 2>&1
bb() { # name dir concurrency [host args]
  timeout 150 python3 $2/bench/gpu/batch_bench.py --stride 4 --concurrency $3 --lines 96 --warm --s2mel-dtype bf16 \
    --host-args="${4:-}" --out $R/$1 --name=-$1 > $R/$1.log 2>&1
  echo "== $1 rc=$?"; tail -3 $R/$1.log | grep "^| 16\|^| 1 "
}
bb old .devbin/old 16,16
bb w05 . 1,16,16 "--s2mel-waste 0.5"
bb w10 . 16,16 "--s2mel-waste 1.0"
bb w025 . 16,16 "--s2mel-waste 0.25"
bb old2 .devbin/old 16,16
cd $TOP && tar czf res.tgz r && rm -rf r
