package gpu

import (
	"testing"
	"time"

	"dubstudio/i18n"

	"github.com/stretchr/testify/require"
)

func TestAnalyzeCalibration(t *testing.T) {
	t.Parallel()
	mb := func(n int64) int64 { return n * MiB }
	run := func(bucket string, sec float64, peak, fallback int64, d time.Duration) Run {
		return Run{Bucket: bucket, Characters: int(sec * 15), AudioSeconds: sec, PeakBytes: mb(peak),
			FallbackBytes: mb(fallback), Counter: CounterNVML, Duration: d}
	}
	in := CalibrationInput{
		ResidentBytes: 5 * GiB,
		Runs: []Run{
			run("short", 2.1, 118, 5130, 3*time.Second), // first run at a length is slow
			run("short", 2.0, 121, 5130, time.Second),
			run("short", 2.2, 119, 5130, time.Second),
			run("medium", 12, 470, 5600, 6*time.Second),
			run("medium", 12.3, 479, 5610, 6*time.Second),
			run("medium", 11.8, 466, 5610, 6*time.Second),
			run("long", 30, 1160, 6300, 14*time.Second),
			run("long", 29.5, 1150, 6300, 14*time.Second), // only two runs: not trusted
		},
	}
	rep := AnalyzeCalibration(in)
	require.Equal(t, 5*GiB, rep.Calibration.ResidentBytes)
	require.Len(t, rep.Buckets, 3)

	short := rep.Buckets[0]
	require.Equal(t, "short", short.Bucket)
	require.Equal(t, 3, short.Runs)
	require.Equal(t, mb(121), short.PeakBytes, "the worst run, never the mean")
	require.InDelta(t, 2.0, short.MinAudioSeconds, 1e-9)
	require.InDelta(t, 2.2, short.MaxAudioSeconds, 1e-9)
	require.Equal(t, 33, short.MaxCharacters)
	require.Equal(t, 5*time.Second/3, short.MeanDuration)
	require.Equal(t, 3*time.Second, short.MaxDuration)
	require.True(t, short.Trusted)
	require.False(t, rep.Buckets[2].Trusted)

	require.Equal(t, []CurvePoint{
		{AudioSeconds: 2.0, PeakBytes: mb(121)},
		{AudioSeconds: 11.8, PeakBytes: mb(479)},
	}, rep.Calibration.Points, "trusted buckets only, worst peak at the shortest length")
	require.Equal(t, mb(479), rep.Calibration.PeakBytes(11.8))
	require.Empty(t, rep.Leaks, "the NVML fallback rises across buckets because the cache ratchets: no leak")
	require.Len(t, rep.Warnings, 1)
	require.Equal(t, "gpu.calibration.too_few_runs", rep.Warnings[0].Key)
	require.Equal(t, []any{"long", 2, 3}, rep.Warnings[0].Args)
	require.NotContains(t, i18n.T(i18n.ZH, rep.Warnings[0].Key, rep.Warnings[0].Args...), "%!")
}

func TestAnalyzeCalibrationFindsALeak(t *testing.T) {
	t.Parallel()
	var runs []Run
	for i := range 5 { // the same line, each run leaving 40 MiB more behind
		runs = append(runs, Run{Bucket: "medium", AudioSeconds: 12, PeakBytes: 480 * MiB,
			FallbackBytes: 5*GiB + int64(i)*40*MiB, Counter: CounterNVML})
	}
	rep := AnalyzeCalibration(CalibrationInput{ResidentBytes: 5 * GiB, Runs: runs})
	require.Len(t, rep.Leaks, 1)
	leak := rep.Leaks[0]
	require.Equal(t, "medium", leak.Bucket)
	require.Equal(t, 5, leak.Runs)
	require.Equal(t, 5*GiB, leak.FromBytes)
	require.Equal(t, 5*GiB+160*MiB, leak.ToBytes)
	w := leak.Warning()
	require.Equal(t, "gpu.calibration.leak", w.Key)
	require.Contains(t, i18n.T(i18n.EN, w.Key, w.Args...), "over 5 runs (from 5.37 GB to 5.54 GB)")
	require.Contains(t, rep.Warnings, w)

	// Allocated memory after runs must not rise across buckets either.
	mixed := []Run{
		{Bucket: "short", AudioSeconds: 2, FallbackBytes: 4300 * MiB, Counter: CounterTorchAllocated},
		{Bucket: "medium", AudioSeconds: 12, FallbackBytes: 4340 * MiB, Counter: CounterTorchAllocated},
		{Bucket: "long", AudioSeconds: 30, FallbackBytes: 4380 * MiB, Counter: CounterTorchAllocated},
		{Bucket: "short", AudioSeconds: 2, FallbackBytes: 4420 * MiB, Counter: CounterTorchAllocated},
	}
	rep = AnalyzeCalibration(CalibrationInput{Runs: mixed, MinRuns: 1})
	require.Len(t, rep.Leaks, 1)
	require.Empty(t, rep.Leaks[0].Bucket)
}

func TestDetectLeak(t *testing.T) {
	t.Parallel()
	const tol = 10
	tests := []struct {
		name     string
		series   []int64
		leak     bool
		runs     int
		from, to int64
	}{
		{"flat", []int64{100, 100, 105, 100, 103}, false, 0, 0, 0},
		{"too short", []int64{100, 150, 200}, false, 0, 0, 0},
		{"three rises", []int64{100, 120, 140, 160}, true, 4, 100, 160},
		{"rises within tolerance", []int64{100, 103, 106, 109, 112}, false, 0, 0, 0},
		{"slow creep", []int64{100, 108, 116, 124, 132, 140, 148}, true, 7, 100, 148},
		{"drop resets creep", []int64{100, 108, 116, 60, 68, 76}, false, 0, 0, 0},
		{"one jump is a ratchet", []int64{100, 100, 400, 400, 400}, false, 0, 0, 0},
		{"longest stretch", []int64{100, 90, 120, 140, 160, 180, 170}, true, 5, 90, 180},
		{"empty", nil, false, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := DetectLeak(tt.series, tol, 3)
			require.Equal(t, tt.leak, ok)
			if ok {
				require.Equal(t, LeakWarning{Runs: tt.runs, FromBytes: tt.from, ToBytes: tt.to}, got)
			}
		})
	}
}

func TestLoadTestSteps(t *testing.T) {
	t.Parallel()
	require.Equal(t, []int{1}, LoadTestSteps(1))
	require.Equal(t, []int{1, 2, 3, 4, 6, 8}, LoadTestSteps(8))
	require.Equal(t, []int{1, 2, 3, 4, 6, 8, 12, 16, 24, 32}, LoadTestSteps(40))
	require.Empty(t, LoadTestSteps(0))
}

func TestAnalyzeLoadTest(t *testing.T) {
	t.Parallel()
	// step builds a healthy step from the audio seconds per wall second measured on
	// the H200 (docs/indextts.md), 20 lines of 5 s each per synthesis at once.
	step := func(n int, aps float64) LoadStep {
		lat := time.Duration(float64(n) * 5 / aps * float64(time.Second))
		return LoadStep{Concurrency: n, Tasks: 20 * n, Successes: 20 * n, AvgLatency: lat,
			P95Latency: lat * 5 / 4, PeakVRAMBytes: int64(n) * 6 * GiB, Throughput: aps}
	}
	crash := func(s LoadStep, ooms, killed int) LoadStep {
		s.OOMs, s.Killed, s.Successes = ooms, killed, s.Tasks-ooms-killed
		return s
	}
	tests := []struct {
		name                           string
		steps                          []LoadStep
		crashAt, slowdownAt, recommend int
		why                            string
	}{
		{"latency doubles but throughput still grows: keep going",
			[]LoadStep{step(1, 0.8), step(2, 1.6), step(4, 2.3), step(8, 3.9), step(12, 4.5)},
			0, 0, 12, "untested_limit"},
		{"throughput flattens",
			[]LoadStep{step(1, 0.8), step(2, 1.5), step(3, 2.1), step(4, 2.15)},
			0, 4, 3, "slowdown"},
		{"the film workload's fixed pools on an H200 (docs/benchmarks.md): 8",
			[]LoadStep{step(1, 3.81), step(2, 5.76), step(3, 6.17), step(4, 6.83), step(6, 8.18), step(8, 8.71),
				step(12, 8.53), step(16, 8.69)},
			0, 12, 8, "slowdown"},
		{"measured H200 (bench host, 2026-11-29): the lowest concurrency within 3% of the best",
			[]LoadStep{step(1, 2.11), step(2, 2.59), step(3, 3.81), step(4, 3.96), step(6, 4.23), step(8, 4.36)},
			0, 4, 6, "slowdown"},
		{"crash before slowdown",
			[]LoadStep{step(1, 0.8), step(2, 1.6), step(3, 2.3), crash(step(4, 2.8), 2, 0)},
			4, 0, 3, "crash"},
		{"killed hosts count as a crash",
			[]LoadStep{step(1, 0.8), step(2, 1.6), crash(step(3, 2.3), 0, 1)},
			3, 0, 2, "crash"},
		{"slowdown below a later crash",
			[]LoadStep{step(1, 0.8), step(2, 1.6), step(4, 1.62), crash(step(6, 1.7), 1, 0)},
			6, 4, 2, "slowdown"},
		{"still rising at the crash",
			[]LoadStep{step(1, 0.8), step(2, 1.6), step(4, 1.9), crash(step(6, 1.7), 1, 0)},
			6, 0, 4, "crash"},
		{"no limit reached: keep the last step",
			[]LoadStep{step(1, 0.8), step(2, 1.6), step(3, 2.4)},
			0, 0, 3, "untested_limit"},
		{"one at a time already fails",
			[]LoadStep{crash(step(1, 0.8), 1, 0), step(2, 1.6)},
			1, 0, 0, "crash"},
		{"unsorted input",
			[]LoadStep{step(4, 2.3), step(1, 0.8), step(2, 1.6), step(3, 2.31)},
			0, 4, 3, "slowdown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := AnalyzeLoadTest(tt.steps)
			require.NoError(t, err)
			require.Equal(t, tt.crashAt, v.CrashAt, "crash point")
			require.Equal(t, tt.slowdownAt, v.SlowdownAt, "slowdown point")
			require.Equal(t, tt.recommend, v.Recommended)
			require.Equal(t, tt.why, v.Why)
			for i := 1; i < len(v.Steps); i++ {
				require.Less(t, v.Steps[i-1].Concurrency, v.Steps[i].Concurrency)
			}
		})
	}
	require.False(t, LoadTestSettled(nil))
	require.False(t, LoadTestSettled([]LoadStep{step(1, 1), step(2, 1.02)}))
	require.True(t, LoadTestSettled([]LoadStep{step(1, 1), crash(step(2, 2), 1, 0)}))
	require.False(t, LoadTestSettled([]LoadStep{step(1, 1), step(2, 1.02), step(3, 1.5)}))
	require.True(t, LoadTestSettled([]LoadStep{step(1, 1), step(2, 1.5), step(3, 1.52), step(4, 1.49)}))
	require.False(t, LoadTestSettled([]LoadStep{step(1, 3.81), step(2, 5.76), step(3, 6.17), step(4, 6.83)}),
		"still rising: go on")
	require.True(t, LoadTestSettled([]LoadStep{step(1, 3.81), step(2, 5.76), step(3, 6.17), step(4, 6.83),
		step(6, 8.18), step(8, 8.71), step(12, 8.53), step(16, 8.69)}))
	_, err := AnalyzeLoadTest(nil)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = AnalyzeLoadTest([]LoadStep{step(2, 1), step(2, 1)})
	require.ErrorIs(t, err, ErrInvalid)
}

func TestBatchLoadTestSteps(t *testing.T) {
	t.Parallel()
	require.Equal(t, []int{1}, BatchLoadTestSteps(1))
	require.Equal(t, []int{1, 2, 4, 8}, BatchLoadTestSteps(8))
	require.Equal(t, []int{1, 2, 4, 8, 16, 32, 38}, BatchLoadTestSteps(38))
	require.Equal(t, []int{1, 2, 3}, BatchLoadTestSteps(3))
	require.Empty(t, BatchLoadTestSteps(0))
}

func TestAnalyzeBatchLoadTest(t *testing.T) {
	t.Parallel()
	// step is a healthy step of n lines at once giving aps audio seconds per second,
	// a line taking lat seconds per audio second.
	step := func(n int, aps, lat float64) LoadStep {
		return LoadStep{Concurrency: n, Tasks: 2 * n, Successes: 2 * n, Throughput: aps, LatencyPerAudioSecond: lat}
	}
	crash := func(s LoadStep) LoadStep { s.OOMs, s.Successes = 1, s.Tasks-1; return s }
	tests := []struct {
		name                                      string
		steps                                     []LoadStep
		crashAt, slowdownAt, latencyAt, recommend int
		why                                       string
	}{
		{"the gain stops before latency grows: the knee",
			[]LoadStep{step(1, 2, 0.5), step(2, 3.8, 0.55), step(4, 7, 0.6), step(8, 7.1, 1.1)},
			0, 8, 0, 4, "slowdown"},
		{"latency past 3x is named but does not cap the batch: throughput still grows",
			[]LoadStep{step(1, 2, 0.5), step(2, 3.8, 0.55), step(4, 7, 1.2), step(8, 10, 1.4), step(16, 12, 2.7)},
			0, 0, 16, 16, "untested_limit"},
		{"the latency point is not looked for past a failed step",
			[]LoadStep{step(1, 2, 0.5), step(2, 3.8, 0.55), crash(step(4, 7, 2.0))},
			4, 0, 0, 2, "crash"},
		{"the host's maximum sequences reached, still gaining",
			[]LoadStep{step(1, 2, 0.5), step(2, 3.8, 0.55), step(4, 7, 0.6)},
			0, 0, 0, 4, "untested_limit"},
		{"an out-of-memory error ends the test",
			[]LoadStep{step(1, 2, 0.5), step(2, 3.8, 0.55), crash(step(4, 7, 0.6))},
			4, 0, 0, 2, "crash"},
		{"one line alone fails",
			[]LoadStep{crash(step(1, 2, 0.5))},
			1, 0, 0, 0, "crash"},
		{"issue 15's H200 figures: 385 tokens/s alone, 2,950 at 64",
			[]LoadStep{step(1, 7.7, 0.13), step(2, 14, 0.14), step(4, 25, 0.16), step(8, 38, 0.21), step(16, 48, 0.33),
				step(32, 55, 0.58), step(64, 59, 1.08)},
			0, 0, 32, 64, "untested_limit"},
		{"this host's H200 calibration of 2026-12-03 (cut off at 64)",
			[]LoadStep{step(1, 12.45, 0.080), step(2, 15.61, 0.125), step(4, 17.72, 0.217), step(8, 20.71, 0.368),
				step(16, 22.67, 0.683), step(32, 24.00, 1.293)},
			0, 0, 8, 32, "untested_limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := AnalyzeBatchLoadTest(tt.steps)
			require.NoError(t, err)
			require.Equal(t, tt.crashAt, v.CrashAt, "crash point")
			require.Equal(t, tt.slowdownAt, v.SlowdownAt, "slowdown point")
			require.Equal(t, tt.latencyAt, v.LatencyAt, "latency point")
			require.Equal(t, tt.recommend, v.Recommended)
			require.Equal(t, tt.why, v.Why)
		})
	}
	_, err := AnalyzeBatchLoadTest(nil)
	require.ErrorIs(t, err, ErrInvalid)

	require.False(t, BatchLoadTestSettled(nil))
	require.False(t, BatchLoadTestSettled([]LoadStep{step(1, 2, 0.5)}))
	require.False(t, BatchLoadTestSettled([]LoadStep{step(1, 2, 0.5), step(2, 3, 0.6)}))
	require.True(t, BatchLoadTestSettled([]LoadStep{step(1, 2, 0.5), step(2, 3, 0.6), step(4, 3.1, 1)}), "under 5% more")
	require.True(t, BatchLoadTestSettled([]LoadStep{step(1, 2, 0.5), crash(step(2, 3, 0.6))}))
}

func TestBatchSequencesThatFit(t *testing.T) {
	t.Parallel()
	require.Equal(t, 40, BatchSequencesThatFit(4*GiB, 100*MiB, 10*MiB, 20*GiB, 8*GiB), "the KV pool")
	require.Equal(t, 12, BatchSequencesThatFit(4*GiB, 100*MiB, GiB, 20*GiB, 8*GiB), "the activations beside the host")
	require.Equal(t, MaxBatchSequences, BatchSequencesThatFit(400*GiB, MiB, MiB, 800*GiB, 8*GiB))
	require.Zero(t, BatchSequencesThatFit(GiB, 2*GiB, MiB, 20*GiB, 8*GiB))
	require.Zero(t, BatchSequencesThatFit(GiB, MiB, MiB, 4*GiB, 8*GiB), "the host alone overflows the budget")
}
