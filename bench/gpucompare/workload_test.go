package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTurnsMergeOneSpeakersCues(t *testing.T) {
	cues := []cue{{0, 2000, false}, {2100, 4000, false}, {4200, 5000, true}, {5100, 6000, false}, {9000, 30000, false}, {30050, 36000, false}}
	got := turns(cues, 300, 25000)
	require.Equal(t, []cue{{0, 4000, false}, {4200, 5000, true}, {5100, 6000, false}, {9000, 30000, false}, {30050, 36000, false}}, got)
}

func TestTheFilmScript(t *testing.T) {
	cues, err := readCues("testdata/film_cues.tsv")
	require.NoError(t, err)
	require.Len(t, cues, 1330)
	ls, err := script(turns(cues, defaultMaxGapMs, defaultMaxLineMs), defaultFrom, defaultLines, 3)
	require.NoError(t, err)
	require.Len(t, ls, 150)
	lo, hi := ls[0].Seconds, ls[0].Seconds
	for _, l := range ls {
		lo, hi = min(lo, l.Seconds), max(hi, l.Seconds)
		require.NotEmpty(t, l.Text)
	}
	require.Less(t, lo, 1.5)
	require.Greater(t, hi, 20.0)
	require.LessOrEqual(t, hi, 25.0)
	_, err = script(nil, 0, 1, 3)
	require.Error(t, err)
}

func TestSimulatedComparison(t *testing.T) {
	// The whole benchmark on simulator hosts and a simulated card shrunk to 24 GiB:
	// the three methods, the memory holder's place taken by the card's foreign memory.
	o := options{cues: "testdata/film_cues.tsv", from: defaultFrom, lines: 12, characters: 3, leaveGiB: 24,
		methods: "fixed,executor,batched", steps: "1,2", sim: true, out: t.TempDir(),
		batch: batchOptions{maxSequences: 16, beams: 1}}
	var out strings.Builder
	require.NoError(t, compare(context.Background(), o, &out))
	s := out.String()
	require.Contains(t, s, "| fixed | 1 |")
	require.Contains(t, s, "| fixed | 2 |")
	require.Contains(t, s, "| executor |")
	require.Contains(t, s, "Executor (")
	require.Contains(t, s, "| batched | 1 |")
	require.Contains(t, s, "Batched (one host, 16 sequences, 1 beams)")
	b, err := os.ReadFile(filepath.Join(o.out, "results.json"))
	require.NoError(t, err)
	var res struct {
		Runs []result `json:"runs"`
	}
	require.NoError(t, json.Unmarshal(b, &res))
	require.Len(t, res.Runs, 4)
	for _, r := range res.Runs {
		require.True(t, r.healthy(), "%+v", r)
		require.Equal(t, 12, r.Done)
		require.Positive(t, r.AudioSeconds)
		require.Positive(t, r.P95ShortSeconds, "the workload has lines up to 5 s")
	}
	batched := res.Runs[3]
	require.Equal(t, "batched", batched.Method)
	require.Equal(t, 16, batched.Sequences)
	require.True(t, batched.Profile.Batching)
	require.Positive(t, batched.BatchRowsMost, "lines decoded side by side")
	require.Positive(t, batched.StageSeconds["gpt"])
	_, err = os.Stat(filepath.Join(o.out, "calibration-24-GiB.json"))
	require.NoError(t, err)
}

func TestBatchedS2melPrecisionComesFromTheProfile(t *testing.T) {
	host := "tts/hosts/bench_host.py --decode-stride 4 --s2mel-dtype bf16"
	require.NoError(t, checkS2mel("fixed", host, "fp32"), "version-1 hosts take -host's flags")
	require.NoError(t, checkS2mel("fixed,batched", host, "bf16"))
	require.NoError(t, checkS2mel("batched", "tts/hosts/bench_host.py", "fp32"))
	err := checkS2mel("fixed,batched", host, "fp32")
	require.ErrorContains(t, err, "set -s2mel bf16")
	require.ErrorContains(t, checkS2mel("batched", "h.py --s2mel-dtype=bf16", "fp32"), "--s2mel-dtype bf16")
}
