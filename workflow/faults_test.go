package workflow_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/gpu"
	"dubstudio/internal/simdev"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/tts"
	"dubstudio/workflow"
	"dubstudio/workflow/workflowtest"
)

// Fault injection: each test breaks one thing a render depends on (a worker, a model
// host, Postgres, the engine's answer, the disk) in the middle of a render and checks
// that every line still ends done exactly once. Limits passed to waitSettled bound
// hangs; nothing here asserts how fast recovery is.

// faultWorkerConfig is the worker configuration of the fault tests: short polls,
// heartbeats and backoff so that recovery takes seconds.
func faultWorkerConfig(name, dataDir string) workflow.WorkerConfig {
	return workflow.WorkerConfig{
		Name: name, DataDir: dataDir, FetchPollInterval: 100 * time.Millisecond,
		JobTimeout: 20 * time.Second, RescueAfter: 30 * time.Second,
		Heartbeat: 300 * time.Millisecond, DeadAfter: 2 * time.Second,
		RetryBase: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond, OOMRetries: 1,
		MaxAttempts: 25,
	}
}

// startWorkerWith starts a worker over permits; cfg, when set, adjusts its configuration.
func (b *testBundle) startWorkerWith(t *testing.T, permits workflow.Permits, cfg func(*workflow.WorkerConfig)) *workflow.Worker {
	t.Helper()
	c := faultWorkerConfig(fmt.Sprintf("fault-%d", time.Now().UnixNano()), b.DataDir)
	if cfg != nil {
		cfg(&c)
	}
	w, err := workflow.NewWorker(b.Pipeline, permits, c, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Logf("stopping the worker: %v", err) // a hung engine's job may outlive the grace period
		}
	})
	return w
}

// requireDoneOnce checks that every line of the project is done (or in review) with
// exactly one take, and that the current take belongs to the line's current render.
func (b *testBundle) requireDoneOnce(t *testing.T, want int) {
	t.Helper()
	ctx := context.Background()
	counts, err := b.Store.ProjectStateCounts(ctx, []int64{b.Project.ID})
	require.NoError(t, err)
	c := counts[b.Project.ID]
	require.Equal(t, want, c[studio.StateDone]+c[studio.StateNeedsReview], "%v", c)
	var takes, lines, mismatched, perLineMax int
	require.NoError(t, b.Store.Pool().QueryRow(ctx, `SELECT count(*), count(DISTINCT line_id) FROM takes WHERE project_id = $1`,
		b.Project.ID).Scan(&takes, &lines))
	require.Equal(t, want, lines, "every line has a take")
	require.Equal(t, want, takes, "one take per line: nothing rendered twice into a second take")
	require.NoError(t, b.Store.Pool().QueryRow(ctx, `SELECT coalesce(max(n), 0) FROM
		(SELECT count(*) AS n FROM takes WHERE project_id = $1 GROUP BY line_id, render_seq) x`, b.Project.ID).Scan(&perLineMax))
	require.Equal(t, 1, perLineMax)
	require.NoError(t, b.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM lines l LEFT JOIN takes t ON t.id = l.current_take_id
		WHERE l.project_id = $1 AND (t.id IS NULL OR t.render_seq <> l.render_seq)`, b.Project.ID).Scan(&mismatched))
	require.Zero(t, mismatched, "every current take belongs to the line's current render")
}

// TestRescuedSynthesisOfAFinishedRenderChangesNothing re-runs a synthesize job whose
// render is already done, as River's rescuer or RescueDeadWorkers does when a worker
// dies after the job's last write but before River recorded its completion. The line
// must stay done with its one take; before the fix the re-run moved it back to
// fitting, where it stayed, since its fit job was a duplicate of a completed one.
func TestRescuedSynthesisOfAFinishedRenderChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	ctx := context.Background()
	b.startWorkerWith(t, workflow.NewLocalPermits(simulator(t), 2), nil)
	_, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	b.WaitSettled(t, time.Minute)
	b.requireDoneOnce(t, 2)

	// Hand the finished jobs back, as a rescue does with jobs left running.
	res, err := b.Store.Pool().Exec(ctx, `UPDATE river_job SET state = 'available', scheduled_at = now(), finalized_at = NULL
		WHERE kind = 'synthesize_line'`)
	require.NoError(t, err)
	require.EqualValues(t, 2, res.RowsAffected())
	deadline := time.Now().Add(time.Minute)
	for {
		var left int
		require.NoError(t, b.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'synthesize_line'
			AND state <> 'completed'`).Scan(&left))
		if left == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the re-run jobs never completed")
		time.Sleep(20 * time.Millisecond)
	}
	b.WaitSettled(t, time.Minute)
	b.requireDoneOnce(t, 2)
}

// setupFault is setup without the espeak-ng requirement: the fault tests speak with
// the simulator or the stand-in model host.
func setupFault(t *testing.T, lines int) *testBundle {
	t.Helper()
	store := studiotest.Store(t)
	return bundleOn(t, store, lines)
}

func bundleOn(t *testing.T, store *studio.Store, lines int) *testBundle {
	t.Helper()
	return &testBundle{workflowtest.On(t, store, lines)}
}

// TestModelHostKilledMidRender kills model-host processes with SIGKILL, twice, in the
// middle of a 200-line render. The pool restarts them, the requests they were serving
// fail as unavailable and are retried, and every line ends done exactly once.
func TestModelHostKilledMidRender(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: renders 200 lines")
	}
	t.Parallel()
	ctx := context.Background()
	b := setupFault(t, 200)
	hb := setupHosts(t, b, 2, nil)
	b.startWorkerWith(t, hb.permits, nil)
	n, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	require.Equal(t, 200, n)

	for _, at := range []int{30, 120} {
		b.waitProgress(t, at, 2*time.Minute)
		pid := hb.busyHost(t, time.Minute)
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL), "killing host %d", pid)
	}
	b.WaitSettled(t, 3*time.Minute)
	b.requireDoneOnce(t, 200)
	require.GreaterOrEqual(t, hb.events.count(gpu.EventExited), 2, "the pool saw its hosts die")
	require.GreaterOrEqual(t, hb.events.count(gpu.EventStarted), 4, "and started new ones")
	var retried int
	require.NoError(t, b.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM lines WHERE project_id = $1 AND attempts > 1`,
		b.Project.ID).Scan(&retried))
	require.Positive(t, retried, "a request was lost with its host and retried")
}

// TestModelHostHangsMidRender freezes a model host (SIGSTOP) while it serves a request.
// Health checks are off, so only the synthesis deadline can notice: the attempt is
// abandoned, the permit reports the host hung and its owner kills it, the pool starts a
// new one, and the line is retried and done.
func TestModelHostHangsMidRender(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: renders 100 lines")
	}
	t.Parallel()
	ctx := context.Background()
	b := setupFault(t, 100)
	hb := setupHosts(t, b, 2, func(c *gpu.PoolConfig) { c.HealthInterval = time.Hour })
	b.startWorkerWith(t, hb.permits, func(c *workflow.WorkerConfig) {
		c.SynthesisTimeoutBase, c.SynthesisTimeoutPerSecond = 2*time.Second, time.Second
	})
	_, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)

	b.waitProgress(t, 20, 2*time.Minute)
	pid := hb.busyHost(t, time.Minute)
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP), "freezing host %d", pid)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	b.WaitSettled(t, 3*time.Minute)
	b.requireDoneOnce(t, 100)
	require.GreaterOrEqual(t, hb.permits.hungKills.Load(), int64(1), "the hung host was killed")
	require.GreaterOrEqual(t, hb.events.count(gpu.EventExited), 1)
	var deadlines int
	require.NoError(t, b.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM river_job, jsonb_array_elements(to_jsonb(errors)) e
		WHERE kind = 'synthesize_line' AND e->>'error' LIKE '%synthesis deadline%'`).Scan(&deadlines))
	require.Positive(t, deadlines, "the attempt failed on the deadline")
}

// hungCounter counts permits given back as hung.
type hungCounter struct {
	workflow.Permits
	hung atomic.Int64
}

type countedPermit struct {
	workflow.Permit
	c *hungCounter
}

func (h *hungCounter) Acquire(ctx context.Context, req workflow.PermitRequest) (workflow.Permit, error) {
	s, err := h.Permits.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	return countedPermit{Permit: s, c: h}, nil
}

func (s countedPermit) Done(o workflow.Outcome) {
	if o.Hung {
		s.c.hung.Add(1)
	}
	s.Permit.Done(o)
}

// TestHungEngineIsAbandonedAtItsDeadline hangs three requests of an in-process engine:
// each is abandoned when the deadline for its line's length passes (base + per second
// of audio), reported hung, and retried.
func TestHungEngineIsAbandonedAtItsDeadline(t *testing.T) {
	t.Parallel()
	b := setupFault(t, 10)
	ctx := context.Background()
	sim := simulator(t)
	sim.Inject(tts.FaultHang, tts.FaultHang, tts.FaultHang)
	permits := &hungCounter{Permits: workflow.NewLocalPermits(sim, 2)}
	b.startWorkerWith(t, permits, func(c *workflow.WorkerConfig) {
		c.SynthesisTimeoutBase, c.SynthesisTimeoutPerSecond = time.Second, 100*time.Millisecond
	})
	_, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	b.WaitSettled(t, time.Minute)
	b.requireDoneOnce(t, 10)
	require.EqualValues(t, 3, permits.hung.Load())
	var msgs []string
	rows, err := b.Store.Pool().Query(ctx, `SELECT e->>'error' FROM river_job, jsonb_array_elements(to_jsonb(errors)) e
		WHERE kind = 'synthesize_line'`)
	require.NoError(t, err)
	for rows.Next() {
		var m string
		require.NoError(t, rows.Scan(&m))
		msgs = append(msgs, m)
	}
	require.NoError(t, rows.Err())
	require.Len(t, msgs, 3)
	// The deadline is 1 s + 100 ms per second of the line's audio: its 1.5 s slot,
	// or the natural length of its text when that is longer.
	text := b.Lines(t)[0].Text
	secs := max(1.5, tts.PredictNaturalSeconds(text, tts.GuessLanguage(text)))
	want := fmt.Sprintf("no answer within the synthesis deadline of %s", time.Second+time.Duration(secs*float64(100*time.Millisecond)))
	for _, m := range msgs {
		require.Contains(t, m, want)
	}
}

// pacedSimulator is the simulator taking about 100 ms per line of these tests, so
// that a 200-line render lasts long enough for faults to land in its middle.
func pacedSimulator(t *testing.T) *tts.Simulator {
	t.Helper()
	sim, err := tts.NewSimulator(tts.SimulatorConfig{Device: simdev.New(24 << 30), FollowTarget: true, Tone: true, TokensPerSecond: 750})
	require.NoError(t, err)
	return sim
}
