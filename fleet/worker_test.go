package fleet_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/fleet"
	"dubstudio/gpu"
	"dubstudio/gpu/ttshost"
	"dubstudio/internal/simdev"
	"dubstudio/studio"
	"dubstudio/tts"
	"dubstudio/workflow"
)

// gpuWorkerBundle renders a project on a worker whose GPUs run real model-host
// processes (fleet/testdata/slow_host.py) on a simulated card.
type gpuWorkerBundle struct {
	*testBundle
	gpus   *fleet.GPUs
	busy   string
	killed atomic.Int64
}

func setupGPUWorker(t *testing.T, lines int) *gpuWorkerBundle {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	b := setup(t, lines)
	ctx := context.Background()
	blobs := studio.BlobStore{Dir: b.DataDir + "/blobs"}
	chars, err := b.Store.Characters(ctx, b.Project.ID)
	require.NoError(t, err)
	for i, c := range chars {
		ref := filepath.Join(t.TempDir(), fmt.Sprintf("ref-%d.wav", i))
		samples := make([]int16, 16000)
		for j := range samples {
			samples[j] = int16((j * (i + 3)) % 3000)
		}
		require.NoError(t, tts.WriteWAV(ref, 16000, samples))
		blob, err := b.Store.PutBlob(ctx, blobs, ref, studio.Blob{Format: "wav", DurationMs: 1000, SampleRate: 16000, Channels: 1})
		require.NoError(t, err)
		require.NoError(t, b.Store.SetCharacterReference(ctx, b.Project.ID, c.ID, blob.SHA256, "ref.wav"))
	}
	hosts, err := filepath.Abs("../tts/hosts")
	require.NoError(t, err)
	script, err := filepath.Abs("testdata/slow_host.py")
	require.NoError(t, err)
	busy := t.TempDir()
	dev := simdev.New(24 * gpu.GiB)
	mon := gpu.NewMonitor(ctx, gpu.MonitorConfig{Driver: ttshost.NewSimDriver(ttshost.SimDevice{UUID: simGPU, Name: "Simulated", Device: dev})})
	launcher := ttshost.NewLauncher(ttshost.LauncherConfig{
		Name:    "bench",
		Command: func(gpu.LaunchOpts) ([]string, error) { return []string{python, script}, nil },
		Env: []string{"DUBSTUDIO_HOSTS_DIR=" + hosts, "SLOW_HOST_DIR=" + busy, "SLOW_HOST_SECONDS=0.4",
			"PYTHONDONTWRITEBYTECODE=1"},
		ReadyInterval: 20 * time.Millisecond,
		Stderr:        func(gpu.LaunchOpts) io.Writer { return io.Discard },
	})
	gpus, err := fleet.NewGPUs(fleet.GPUsConfig{Engine: "bench", Monitor: mon, Launcher: launcher,
		Pool: gpu.PoolConfig{HealthInterval: 100 * time.Millisecond, RestartBackoff: 20 * time.Millisecond}})
	require.NoError(t, err)
	gpus.Start(ctx)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, gpus.Stop(sctx))
	})
	w, err := workflow.NewWorker(b.Pipeline, gpus, workflow.WorkerConfig{Name: fmt.Sprintf("gpu-%d", time.Now().UnixNano()),
		DataDir: b.DataDir, FetchPollInterval: 100 * time.Millisecond, JobTimeout: 30 * time.Second,
		RescueAfter: 40 * time.Second, Heartbeat: 300 * time.Millisecond, DeadAfter: 5 * time.Second,
		RetryBase: 200 * time.Millisecond, RetryMax: time.Second}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := w.Stop(sctx); err != nil {
			t.Logf("stopping the worker: %v", err)
		}
	})
	return &gpuWorkerBundle{testBundle: b, gpus: gpus, busy: busy}
}

// killMidLine SIGKILLs the first host caught in the middle of a synthesis.
func (g *gpuWorkerBundle) killMidLine(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir(g.busy)
		for _, e := range entries {
			pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "busy-"))
			if err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
				g.killed.Add(1)
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no host was ever caught synthesizing")
}

// A render whose model host is SIGKILLed in the middle of a line still ends with
// every line done: the line fails its attempt as a dead host's, the pool starts a
// new host, and the retry renders it.
func TestGPUWorkerSurvivesAHostKilledMidLine(t *testing.T) {
	t.Parallel()
	g := setupGPUWorker(t, 4)
	ctx := context.Background()
	n, err := g.Pipeline.RenderPending(ctx, g.Project.ID)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	g.killMidLine(t)
	counts := g.WaitSettled(t, 2*time.Minute)
	require.Equal(t, 4, counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)
	require.EqualValues(t, 1, g.killed.Load())

	retried := 0
	for _, l := range g.Lines(t) {
		takes, err := g.Store.Takes(ctx, g.Project.ID, l.ID)
		require.NoError(t, err)
		require.Len(t, takes, 1)
		require.Equal(t, simGPU, takes[0].GPU, "the take names its GPU")
		require.Equal(t, "bench", takes[0].Engine)
		if l.Attempts > 1 {
			retried++
		}
	}
	require.Equal(t, 1, retried, "the killed line was tried again")
	m := metricsOf(g.gpus)
	require.GreaterOrEqual(t, m.HostDeaths, uint64(1))
	restarts := 0
	for _, h := range g.gpus.Live(time.Minute).GPUs[0].Pool {
		restarts += h.Restarts
	}
	require.Equal(t, 1, restarts, "the pool restarted the killed host")
}
