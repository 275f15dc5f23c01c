#!/bin/bash
# call 3 (2026-12-04, second session): call 2's files did not reach a commit (its
# figures are in this directory's README.md). s2mel's preemption bounded: a group is
# passed over at most once (--s2mel-preempt), against one group after another (the
# default), alternating in one call: first the CUDA tests of the s2mel loop (call 2 had
# one failure whose log was lost: the failures are printed here), then latency at 16
# lines in flight, 96 lines, warmed, s2mel bf16, the vocoder fused, as call 1. Runs the
# code in .devbin/now (git archive HEAD tts/hosts bench/gpu bench/gpucompare/testdata).
TOP=$OUT; R=$TOP/r; mkdir -p $R
cd .devbin/now
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 150 python3 -m unittest -v \
  test_batching.CudaGraphTest.test_s2mel_graph_equals_the_eager_flow \
  test_batching.CudaGraphTest.test_graphs_give_the_tokens_and_audio_of_eager_launches \
  test_batching.BatchingTest.test_a_group_run_in_pieces_gives_the_whole_groups_mels \
  test_batching.BatchingTest.test_audio_batched_and_alone \
  test_batching.BatchingTest.test_health_and_sequence_figures \
  test_batching.BatchingTest.test_out_of_memory_in_a_batch_is_retryable_and_the_host_goes_on \
  test_batching.S2MelPreemptionTest > $R/tests.log 2>&1; echo "== tests rc=$?"
  grep -B2 -A25 "^FAIL:\|^ERROR:" $R/tests.log | head -80; tail -3 $R/tests.log)
bb() { # name concurrency host-args limit
  timeout $4 python3 bench/gpu/batch_bench.py --stride 4 --concurrency $2 --lines 96 --warm --s2mel-dtype bf16 \
    --host-args="$3" --out $R/$1 --name=-$1 > $R/$1.log 2>&1
  echo "== $1 rc=$?"; tail -4 $R/$1.log | grep "^| 16\|^| 1 "
  grep -o '"s2mel_preempted": [0-9]*' $R/$1.log | tr '\n' ' '; echo
}
bb once 1,16,16 "--vocoder-fused --s2mel-preempt" 150
bb none 16,16 "--vocoder-fused" 140
bb onceb 16,16 "--vocoder-fused --s2mel-preempt" 140
cd $TOP && tar czf res.tgz r && rm -rf r
