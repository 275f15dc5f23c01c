#!/bin/bash
# call 5 (2026-12-04, second session): every CUDA test of test_batching,
# test_indextts_batching and test_bench_host at the commit in .devbin/now (git archive
# HEAD tts/hosts bench/gpu bench/gpucompare/testdata), after s2mel's runs became step
# by step (91bd039) and --s2mel-preempt (1fa004c): the IndexTTS adapter's CFMRun had
# run only on the CPU.
TOP=$OUT; R=$TOP/r; mkdir -p $R
(cd .devbin/now/tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 540 python3 -m unittest -v \
  test_batching test_indextts_batching test_bench_host > $R/tests.log 2>&1; echo "== tests rc=$?"
  grep -B2 -A25 "^FAIL:\|^ERROR:" $R/tests.log | head -80; grep -c "skipped" $R/tests.log; tail -3 $R/tests.log)
cd $TOP && tar czf res.tgz r && rm -rf r
