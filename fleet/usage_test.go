package fleet_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/fleet"
	"dubstudio/gpu"
	"dubstudio/gpu/calibrate"
	"dubstudio/gpu/ttshost"
	"dubstudio/internal/simdev"
	"dubstudio/studio"
	"dubstudio/tts"
	"dubstudio/workflow"
)

// A project rendered by a worker (River, PostgreSQL) on a GPU whose one host is the
// batching simulator: every take records what the executor admitted its line for
// (read off the executor's seats while the line ran), the host's own account of the
// line (its KV blocks, activations, stage times and batch), the time it waited for a
// permit and in the host, and the GPU. The host's KV pool holds at most three lines
// and the profile admits four, so lines queue in the host; six lines, so lines wait
// for a permit too. Meanwhile the GPU's live state shows the batch.
func TestBatchingWorkerRecordsEachTakesUsage(t *testing.T) {
	t.Parallel()
	const lines = 6
	b := setup(t, lines)
	ctx := context.Background()
	dev := simdev.New(24 * gpu.GiB)
	mon := gpu.NewMonitor(ctx, gpu.MonitorConfig{Interval: 10 * time.Millisecond,
		Driver: ttshost.NewSimDriver(ttshost.SimDevice{UUID: simGPU, Name: "Simulated", Device: dev})})

	var (
		gpus     *fleet.GPUs
		arrived  atomic.Int64 // lines that reached the host
		mu       sync.Mutex
		admitted = map[int64]int64{}                         // line -> the executor's predicted bytes, seen while it ran
		seen     = gpu.LiveBatch{KVFreeBytes: math.MaxInt64} // the most of each count the live state showed, the least KV free
	)
	watch := func() {
		for _, sn := range gpus.Executor().Snapshot() {
			for _, h := range sn.Hosts {
				for _, st := range h.Seats {
					if st.LineID != 0 {
						mu.Lock()
						admitted[st.LineID] = st.PredictedBytes
						mu.Unlock()
					}
				}
			}
		}
		if lb := gpus.Live(time.Minute).GPUs[0].Batch; lb != nil {
			mu.Lock()
			seen.Decoding, seen.InS2Mel = max(seen.Decoding, lb.Decoding), max(seen.InS2Mel, lb.InS2Mel)
			seen.Waiting, seen.KVFreeBytes = max(seen.Waiting, lb.Waiting), min(seen.KVFreeBytes, lb.KVFreeBytes)
			seen.DecodeTokensPerSecond = max(seen.DecodeTokensPerSecond, lb.DecodeTokensPerSecond)
			seen.Decode = lb.Decode
			mu.Unlock()
		}
	}
	launcher := &ttshost.SimLauncher{Devices: map[string]*simdev.Device{simGPU: dev},
		Config: tts.SimulatorConfig{FollowTarget: true, TokensPerSecond: 200,
			FaultFunc: func(tts.Request) tts.Fault { arrived.Add(1); return tts.FaultNone },
			Sleep: func(ctx context.Context, d time.Duration) error {
				// The first lines decode only once a third has reached the host (a
				// bound on a hang, not a timing), so that it waits for a place.
				for deadline := time.Now().Add(20 * time.Second); arrived.Load() < 3 && time.Now().Before(deadline); {
					time.Sleep(5 * time.Millisecond)
				}
				watch()
				return tts.SleepContext(ctx, d)
			}},
		Configure: func(_ gpu.LaunchOpts, c *tts.SimulatorConfig) {
			if c.Batch != nil {
				// A KV pool of at most three lines' blocks (30 to 40 MB each): a
				// fourth waits.
				c.Batch.KVCacheBytes = 100_000_000
			}
		}}
	var err error
	gpus, err = fleet.NewGPUs(fleet.GPUsConfig{Engine: "simulator", Monitor: mon, Simulated: true, Launcher: launcher,
		Memory:   func(string) calibrate.DeviceMemory { return simDeviceMemory{dev} },
		Pool:     gpu.PoolConfig{HealthInterval: 50 * time.Millisecond, RestartBackoff: 10 * time.Millisecond},
		Batching: true})
	require.NoError(t, err)
	launcher.Profile = gpus.LaunchProfile
	p := gpu.DefaultProfile()
	p.Name, p.Batching, p.Concurrency = "batch", true, 4
	require.NoError(t, gpus.Apply(simGPU, fleet.Setting{Profile: p}))
	gpus.Start(ctx)
	// The live state is read as the agent reads it, every few milliseconds here.
	watching := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-watching:
				return
			case <-time.After(5 * time.Millisecond):
				watch()
			}
		}
	}()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, gpus.Stop(sctx))
	})
	w, err := workflow.NewWorker(b.Pipeline, gpus, workflow.WorkerConfig{Name: fmt.Sprintf("batch-%d", time.Now().UnixNano()),
		DataDir: b.DataDir, FetchPollInterval: 50 * time.Millisecond, JobTimeout: 30 * time.Second,
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

	n, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	require.Equal(t, lines, n)
	counts := b.WaitSettled(t, 2*time.Minute)
	require.Equal(t, lines, counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)
	close(watching)
	<-watched

	var hostQueue, permitWait int
	for _, l := range b.Lines(t) {
		takes, err := b.Store.Takes(ctx, b.Project.ID, l.ID)
		require.NoError(t, err)
		require.Len(t, takes, 1)
		tk, u := takes[0], takes[0].Usage
		mu.Lock()
		want, ok := admitted[l.ID]
		mu.Unlock()
		require.True(t, ok, "line %d was seen running", l.ID)
		require.Equal(t, want, u.PredictedVRAMBytes, "line %d: the take's prediction is what the executor admitted", l.ID)
		// Uncalibrated, a batching GPU admits a line at the host's activations per
		// audio second over its slot, safety factor 1.
		require.Equal(t, int64(math.Ceil(float64(l.DurationMs())/1000*tts.SimActivationBytesPerSecond)), u.PredictedVRAMBytes)
		// The host's own account: activations for its audio, KV for its tokens and
		// the conditioning prefix, three beams.
		audio := float64(tk.AudioMs) / 1000
		require.InDelta(t, audio*tts.SimActivationBytesPerSecond, float64(u.ActivationBytes), tts.SimActivationBytesPerSecond*0.002)
		require.Equal(t, u.ActivationBytes, u.MeasuredVRAMBytes, "a batching line is measured at its activations")
		tokens := math.Round(audio * 50)
		require.InDelta(t, (tokens+32)*122_880*3, float64(u.KVBytes), 122_880*3, "line %d", l.ID)
		require.Equal(t, u.KVBytes+u.ActivationBytes, tk.PeakVRAMBytes, "the line's whole share")
		require.Positive(t, u.GPTMs)
		require.Positive(t, u.S2MelMs)
		require.Positive(t, u.VocoderMs)
		require.Greater(t, u.GPTMs, u.S2MelMs)
		require.GreaterOrEqual(t, u.BatchRowsMean, 3.0)
		require.LessOrEqual(t, u.BatchRowsMean, 9.0, "at most three lines of three rows")
		require.Equal(t, 1, u.S2MelGroup)
		require.Equal(t, simGPU, tk.GPU)
		require.NotNil(t, u.GPUIndex)
		require.Equal(t, 0, *u.GPUIndex)
		hostQueue += u.HostQueueMs
		permitWait += u.PermitWaitMs
	}
	require.Positive(t, hostQueue, "a line waited for a place in the host's batch")
	require.Positive(t, permitWait, "a line waited for a permit")

	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, seen.Decoding, 2, "the live state showed the batch's lines decoding")
	require.LessOrEqual(t, seen.Decoding, 3)
	require.Positive(t, seen.Waiting, "and a line waiting in the host")
	require.Positive(t, seen.InS2Mel, "and a line in s2mel")
	require.Positive(t, seen.DecodeTokensPerSecond)
	require.Equal(t, tts.DecodeBeamSearch, seen.Decode, "and how it decodes (3 beams)")
	require.Less(t, seen.KVFreeBytes, int64(100_000_000-2*30_000_000), "and the KV of the lines in use")
	g := gpus.Live(time.Minute).GPUs[0]
	require.NotNil(t, g.Batch)
	require.Equal(t, 4, g.Batch.MaxSequences)
	require.NotEmpty(t, g.BatchRecent)
}
