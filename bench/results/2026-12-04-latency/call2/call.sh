#!/bin/bash
# call 2 (2026-12-04): s2mel's groups begun two at a time, the one of least work left
# stepping first (--s2mel-groups 2, the new default) against one after another
# (--s2mel-groups 1, the code before), one after the other in one call: first the CUDA
# tests of what changed (the flow's graphs resumed after another group's steps, the
# s2mel loop), then latency at 16 lines in flight, 96 lines, warmed, s2mel bf16, the
# vocoder fused, as call 1. Runs the code in .devbin/now (git archive HEAD tts/hosts
# bench/gpu bench/gpucompare/testdata), gpucompare in .devbin/gpu; carry both.
TOP=$OUT; R=$TOP/r; mkdir -p $R
cd .devbin/now
(cd tts/hosts && BATCHING_TEST_DEVICE=cuda timeout 150 python3 -m unittest -v \
  test_batching.CudaGraphTest.test_s2mel_graph_equals_the_eager_flow \
  test_batching.CudaGraphTest.test_graphs_give_the_tokens_and_audio_of_eager_launches \
  test_batching.BatchingTest.test_a_group_run_in_pieces_gives_the_whole_groups_mels \
  test_batching.BatchingTest.test_audio_batched_and_alone \
  test_batching.BatchingTest.test_health_and_sequence_figures \
  test_batching.BatchingTest.test_out_of_memory_in_a_batch_is_retryable_and_the_host_goes_on \
  test_batching.S2MelPreemptionTest > $R/tests.log 2>&1; echo "== tests rc=$?"; tail -3 $R/tests.log)
bb() { # name concurrency host-args limit
  timeout $4 python3 bench/gpu/batch_bench.py --stride 4 --concurrency $2 --lines 96 --warm --s2mel-dtype bf16 \
    --host-args="$3" --out $R/$1 --name=-$1 > $R/$1.log 2>&1
  echo "== $1 rc=$?"; tail -4 $R/$1.log | grep "^| 16\|^| 1 "
  grep -o '"s2mel_preempted": [0-9]*' $R/$1.log | tr '\n' ' '; echo
}
bb groups2 1,16,16 "--vocoder-fused --s2mel-groups 2" 150
bb groups1 16,16 "--vocoder-fused --s2mel-groups 1" 140
bb groups2b 16,16 "--vocoder-fused --s2mel-groups 2" 140
cd $TOP && tar czf res.tgz r && rm -rf r
