package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/internal/simdev"
	"dubstudio/studio"
	"dubstudio/tts"
)

func simulator(t *testing.T) *tts.Simulator {
	t.Helper()
	sim, err := tts.NewSimulator(tts.SimulatorConfig{Device: simdev.New(24 << 30), FollowTarget: true, Tone: true})
	require.NoError(t, err)
	return sim
}

func TestOutOfMemoryIsRetriedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	ctx := context.Background()
	sim := simulator(t)
	sim.Inject(tts.FaultOOM)
	b.startWorker(t, workerOpts{engine: sim, permits: 1})
	_, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	counts := b.WaitSettled(t, time.Minute)
	require.Equal(t, 1, counts[studio.StateDone]+counts[studio.StateNeedsReview], "one OOM is retried: %v", counts)
	require.Equal(t, 2, b.Lines(t)[0].Attempts)

	// Two OOMs in a row exceed OOM_RETRIES (1): the line fails with the reason.
	sim.Inject(tts.FaultOOM, tts.FaultOOM)
	_, err = b.Pipeline.RenderLines(ctx, b.Project.ID, []int64{b.Lines(t)[0].ID})
	require.NoError(t, err)
	counts = b.WaitSettled(t, time.Minute)
	require.Equal(t, 1, counts[studio.StateFailed], "%v", counts)
	l := b.Lines(t)[0]
	require.Equal(t, 2, l.Attempts)
	require.Contains(t, l.LastError, "out_of_memory")
	require.Contains(t, l.LastTraceback, "CUDA out of memory")
}

func TestTransientFailuresBackOffAndRetry(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	ctx := context.Background()
	sim := simulator(t)
	// A crash makes the host unavailable until restarted; a few attempts fail.
	sim.Inject(tts.FaultCrash)
	go func() {
		// Bring the host back once a line has failed twice.
		for {
			var n int
			if err := b.Store.Pool().QueryRow(ctx, `SELECT coalesce(max(attempts), 0) FROM lines`).Scan(&n); err == nil && n >= 2 {
				if err := sim.Restart(); err != nil {
					t.Errorf("restarting the simulated host: %v", err)
				}
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	b.startWorker(t, workerOpts{engine: sim, permits: 1})
	_, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	counts := b.WaitSettled(t, time.Minute)
	require.Equal(t, 2, counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)
	retried := 0
	for _, l := range b.Lines(t) {
		if l.Attempts > 1 {
			retried++
		}
	}
	require.Positive(t, retried)
}

func TestInvalidInputFailsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	ctx := context.Background()
	sim := simulator(t)
	sim.Inject(tts.FaultInvalid)
	b.startWorker(t, workerOpts{engine: sim, permits: 1})
	_, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	counts := b.WaitSettled(t, time.Minute)
	require.Equal(t, 1, counts[studio.StateFailed])
	require.Equal(t, 1, b.Lines(t)[0].Attempts, "no retry for bad input")
	require.Contains(t, b.Lines(t)[0].LastError, "invalid_input")
}

func TestPausedQueueStartsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	ctx := context.Background()
	require.NoError(t, b.Pipeline.PauseSynthesis(ctx))
	paused, err := b.Pipeline.SynthesisPaused(ctx)
	require.NoError(t, err)
	require.True(t, paused)
	sim := simulator(t)
	b.startWorker(t, workerOpts{engine: sim})
	_, err = b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	// Give the worker a chance to (wrongly) start something.
	time.Sleep(1500 * time.Millisecond)
	require.Zero(t, sim.Stats().Requests, "nothing starts while paused")
	require.NoError(t, b.Pipeline.ResumeSynthesis(ctx))
	counts := b.WaitSettled(t, time.Minute)
	require.Equal(t, 3, counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)
}

func TestWorkerRegistersWithHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	b.startWorker(t, workerOpts{name: "registry-test"})
	ws, err := b.Store.Workers(context.Background())
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, "registry-test", ws[0].Name)
	require.Equal(t, []string{"espeak"}, []string(ws[0].Engines))
	require.True(t, ws[0].Alive())
}
