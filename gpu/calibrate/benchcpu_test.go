package calibrate_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/gpu"
	"dubstudio/gpu/calibrate"
	"dubstudio/gpu/ttshost"
)

// TestBatchingCalibrationOfTheBenchHostOnCPU calibrates the real batching bench host
// (tts/hosts/bench_host.py --batch, IndexTTS-2 shapes, random weights) on the CPU:
// decode stride 8 and 4 diffusion steps, lines of 1 and 2 s, up to 2 lines at once, a
// 0.5 GiB KV pool. The host has the model's full dimensions: it wants a CPU machine
// with cores to spare (docs/gpu.md, Tests). It runs only with DUBSTUDIO_BENCH_CPU=1 (the
// python3 of PATH or HOST_PYTHON with torch), from the repository's gpu/calibrate
// directory (go test finds tts/hosts two levels up).
func TestBatchingCalibrationOfTheBenchHostOnCPU(t *testing.T) {
	if os.Getenv("DUBSTUDIO_BENCH_CPU") != "1" {
		t.Skip("set DUBSTUDIO_BENCH_CPU=1 to calibrate the bench host on the CPU (minutes)")
	}
	python := os.Getenv("HOST_PYTHON")
	if python == "" {
		python = "python3"
	}
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		t.Skipf("%s has no torch: %v", python, err)
	}
	host, err := filepath.Abs("../../tts/hosts/bench_host.py")
	require.NoError(t, err)
	p := gpu.Profile{Name: "bench-cpu", Batching: true, Concurrency: 2, Beams: 3, KVCacheGiB: 0.5, ReservePct: 15,
		LongTextThresholdSec: 2, LongLaneLimit: 1, MaxGenSeconds: 2, SegmentTokens: 120}
	l := ttshost.NewLauncher(ttshost.LauncherConfig{Name: "bench",
		Command: func(gpu.LaunchOpts) ([]string, error) {
			return append([]string{python, host, "--device", "cpu", "--gpt-dtype", "fp32", "--decode-stride", "8",
				"--diffusion-steps", "4"}, ttshost.BatchArgs(p)...), nil
		},
		Env: []string{"PYTHONUNBUFFERED=1"}})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	res, err := calibrate.Run(ctx, calibrate.Config{
		GPU: gpu.Device{UUID: "CPU", Name: "CPU", TotalBytes: 64 * gpu.GiB}, Profile: p, WorkDir: t.TempDir(),
		Buckets: []gpu.CalibrationBucket{{Name: "short", Seconds: 1}, {Name: "longest", Seconds: 2}}, LinesPerStep: 4,
		Progress: func(key string, args ...any) { t.Logf("%s %v", key, args) },
		Launch: func(ctx context.Context, i int) (ttshost.EngineHost, error) {
			h, err := l.Launch(ctx, gpu.LaunchOpts{GPU: "CPU", ID: fmt.Sprintf("cpu%d", i)})
			if err != nil {
				return nil, err
			}
			return h.(ttshost.EngineHost), nil
		},
	})
	require.NoError(t, err)
	b := res.Batch
	require.NotNil(t, b)
	require.Equal(t, 2, b.MaxSequences)
	require.Equal(t, 3, b.Beams)
	require.Positive(t, b.KVBytesPerToken)
	require.Positive(t, b.KVCacheBytes)
	require.Len(t, res.Analysis, 2)
	require.Less(t, res.Analysis[0].KVBytes, res.Analysis[1].KVBytes, "a longer line holds more KV")
	require.NotEmpty(t, res.Verdict.Steps)
	for _, s := range res.Verdict.Steps {
		require.True(t, s.Healthy(), "%+v %+v", s, res.Failures)
	}
	require.Positive(t, res.Recommended)
	for _, bk := range res.Analysis {
		t.Logf("bucket %s: %.1f s audio, KV %d B, activations %d B, alone %.1f s", bk.Bucket, bk.MaxAudioSeconds,
			bk.KVBytes, bk.PeakBytes, bk.MeanDuration.Seconds())
	}
	for _, s := range res.Verdict.Steps {
		t.Logf("step %d: %d lines, %.3f audio s/s, %.2f s per audio s", s.Concurrency, s.Tasks, s.Throughput, s.LatencyPerAudioSecond)
	}
	t.Logf("recommended %d (%s), latency point %d, slowdown point %d", res.Recommended, res.Verdict.Why,
		res.Verdict.LatencyAt, res.Verdict.SlowdownAt)
}
