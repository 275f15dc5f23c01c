#!/bin/bash
# call 6 (2026-12-04, second session): the CUDA tests of test_batching at 10c5ee3 (a
# group's steps launched in one go without --s2mel-preempt), in .devbin/now (git
# archive HEAD tts/hosts bench/gpu bench/gpucompare/testdata gpu/profile.go).
TOP=$OUT; R=$TOP/r; mkdir -p $R
(cd .devbin/now/tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 400 python3 -m unittest -v \
  test_batching test_bench_host > $R/tests.log 2>&1; echo "== tests rc=$?"
  grep -B2 -A25 "^FAIL:\|^ERROR:" $R/tests.log | head -60; tail -3 $R/tests.log)
cd $TOP && tar czf res.tgz r && rm -rf r
