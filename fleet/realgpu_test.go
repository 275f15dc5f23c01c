package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/fleet"
	"dubstudio/gpu"
	"dubstudio/gpu/ttshost"
	"dubstudio/tts"
	"dubstudio/workflow"
)

// TestGPUsOnARealGPU runs fleet.GPUs on the first NVIDIA GPU with
// random-weight IndexTTS-2-shaped hosts (tts/hosts/bench_host.py): mixed lengths
// from three goroutines on three hosts, the card's used memory (NVML, sampled every
// 200 ms) never above the budget. It runs only with DUBSTUDIO_GPU_TEST=1, from the
// repository root (DUBSTUDIO_HOSTS_DIR, default tts/hosts) on a machine with a GPU
// and python3 with torch; OUT, when set, receives a JSON summary.
func TestGPUsOnARealGPU(t *testing.T) {
	if os.Getenv("DUBSTUDIO_GPU_TEST") != "1" {
		t.Skip("set DUBSTUDIO_GPU_TEST=1 on a machine with an NVIDIA GPU")
	}
	ctx := context.Background()
	mon := gpu.NewMonitor(ctx, gpu.MonitorConfig{Interval: 200 * time.Millisecond})
	if !mon.Available() {
		t.Skipf("no GPU: %v", mon.Err())
	}
	hosts := os.Getenv("DUBSTUDIO_HOSTS_DIR")
	if hosts == "" {
		hosts = "tts/hosts"
	}
	dev := mon.Devices()[0]
	launcher := ttshost.NewLauncher(ttshost.LauncherConfig{Name: "bench",
		Command: func(gpu.LaunchOpts) ([]string, error) {
			return []string{"python3", filepath.Join(hosts, "bench_host.py"), "--gpt-dtype", "fp16"}, nil
		},
		ProcessBytes: func(uuid string, pid int) (int64, bool) { return mon.ProcessBytes(uuid, pid) },
	})
	gpus, err := fleet.NewGPUs(fleet.GPUsConfig{Engine: "bench", Monitor: mon, GPUs: []gpu.Device{dev},
		Launcher: launcher})
	require.NoError(t, err)
	p := gpu.Profile{Name: "h200-test", Concurrency: 3, ReservePct: 15, LongTextThresholdSec: 8, LongLaneLimit: 1,
		MaxGenSeconds: 10, SegmentTokens: 120, FP16: true}
	require.NoError(t, gpus.Apply(dev.UUID, fleet.Setting{Profile: p}))
	samples, stop := mon.Subscribe()
	gpus.Start(ctx)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, gpus.Stop(sctx))
	}()
	var maxUsed atomic.Int64
	go func() {
		for round := range samples {
			for _, s := range round {
				if s.UUID == dev.UUID && s.UsedBytes > maxUsed.Load() {
					maxUsed.Store(s.UsedBytes)
				}
			}
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	info, err := gpus.Model(wctx)
	require.NoError(t, err)
	ref := filepath.Join(t.TempDir(), "ref.wav")
	samplesRef := make([]int16, 8*16000)
	for i := range samplesRef {
		samplesRef[i] = int16((i * 37) % 4000)
	}
	require.NoError(t, tts.WriteWAV(ref, 16000, samplesRef))

	type line struct {
		Seconds, Synth float64
		PeakAllocated  int64
	}
	var mu sync.Mutex
	var done []line
	var wg sync.WaitGroup
	start := time.Now()
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, secs := range []float64{2, 5, 10} {
				s, err := gpus.Acquire(wctx, workflow.PermitRequest{LineID: int64(g*10 + int(secs)), AudioSeconds: secs, TextRunes: 40})
				if !assert(t, err) {
					return
				}
				t0 := time.Now()
				res, err := s.Engine().Synthesize(wctx, tts.Request{Text: "A benchmark line for the GPU test.", TargetSeconds: secs,
					Speaker: tts.Speaker{ReferenceAudioPath: ref}, OutputPath: filepath.Join(t.TempDir(), "o.wav")})
				s.Done(workflow.Outcome{PeakBytes: res.PeakReservedBytes, OOM: errors.Is(err, tts.ErrOutOfMemory), Failed: err != nil})
				if !assert(t, err) {
					return
				}
				mu.Lock()
				done = append(done, line{Seconds: res.AudioSeconds, Synth: time.Since(t0).Seconds(), PeakAllocated: res.PeakAllocatedBytes})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stop()
	m := gpus.Executor().Metrics().GPUs[0]
	snap := gpus.Executor().Snapshot()[0]
	summary := map[string]any{"gpu": dev, "model": info, "lines": done, "wall_seconds": time.Since(start).Seconds(),
		"max_used_bytes": maxUsed.Load(), "budget_bytes": p.Budget(dev.TotalBytes, 0), "metrics": m, "snapshot": snap}
	if out := os.Getenv("OUT"); out != "" {
		data, err := json.MarshalIndent(summary, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(out, "gpu_snapshot.json"), data, 0o644))
	}
	t.Logf("%d lines in %.1f s; card used at most %.2f GB of a %.2f GB budget; safety factor %.2f; hosts %d",
		len(done), time.Since(start).Seconds(), float64(maxUsed.Load())/1e9, float64(p.Budget(dev.TotalBytes, 0))/1e9,
		m.SafetyFactor, len(snap.Hosts))
	require.Len(t, done, 9)
	require.Zero(t, m.OOMs)
	require.LessOrEqual(t, maxUsed.Load(), p.Budget(dev.TotalBytes, 0))
}

func assert(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}
