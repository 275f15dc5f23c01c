package workflow_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/tts"
	"dubstudio/workflow"
)

// gatedEngine is an engine whose syntheses wait, once they have started, until the
// gate opens (then they speak) or their context ends (then they fail as a model host
// that dropped the request would: unavailable, not context.Canceled).
type gatedEngine struct {
	tts.Engine
	started chan struct{}
	gate    chan struct{}
}

func newGatedEngine(t *testing.T) *gatedEngine {
	t.Helper()
	return &gatedEngine{Engine: simulator(t), started: make(chan struct{}, 16), gate: make(chan struct{})}
}

func (e *gatedEngine) Synthesize(ctx context.Context, req tts.Request) (tts.Result, error) {
	e.started <- struct{}{}
	select {
	case <-e.gate:
		return e.Engine.Synthesize(ctx, req)
	case <-ctx.Done():
		return tts.Result{}, &tts.Error{Code: tts.CodeUnavailable, Message: "the request was dropped"}
	}
}

func (e *gatedEngine) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-e.started:
	case <-time.After(30 * time.Second):
		t.Fatal("no synthesis started")
	}
}

// jobOf reads the state and attempt of the project's one synthesize job.
func (b *testBundle) jobOf(t *testing.T) (state string, attempt int, errs []string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, b.Store.Pool().QueryRow(ctx, `SELECT state, attempt, coalesce(array(SELECT e->>'error'
		FROM unnest(errors) e), '{}') FROM river_job WHERE kind = 'synthesize_line'`).Scan(&state, &attempt, &errs))
	return state, attempt, errs
}

// renderOnLastAttempt queues the project's lines, each job with one attempt: the
// one it runs is its last.
func (b *testBundle) renderOnLastAttempt(t *testing.T) {
	t.Helper()
	_, err := b.Pipeline.RenderPending(context.Background(), b.Project.ID)
	require.NoError(t, err)
	studiotest.Exec(t, b.Store, `UPDATE river_job SET max_attempts = 1 WHERE kind = 'synthesize_line'`)
}

// TestARestartedWorkerHandsBackItsRunningJobs: a worker process died in the middle of
// a line's last attempt and a new one starts under the same name (the default name
// is hostname-pid; in a container both are the same each time). Its registration
// refreshed the heartbeat, so the dead one was never seen dead: the job stayed
// running until River's rescuer (RescueAfter), which discards a job on its last
// attempt, and the line stayed synthesizing for good. The new process hands the
// job back before it works any.
func TestARestartedWorkerHandsBackItsRunningJobs(t *testing.T) {
	t.Parallel()
	b := setupFault(t, 1)
	ctx := context.Background()
	const name = "worker-in-a-container-1"
	_, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	l := b.Lines(t)[0]
	// The process that ran before: registered, its heartbeat recent, on the line's
	// last attempt when it died.
	require.NoError(t, b.Store.RegisterWorker(ctx, studio.WorkerInfo{Name: name, Host: "box", PID: 1}))
	studiotest.Exec(t, b.Store, `UPDATE river_job SET state = 'running', attempt = max_attempts, attempted_at = now(),
		attempted_by = ARRAY[$1] WHERE kind = 'synthesize_line'`, name)
	_, err = b.Store.SetRenderState(ctx, l.ID, l.RenderSeq, studio.StateSynthesizing, 25)
	require.NoError(t, err)

	b.startWorkerWith(t, workflow.NewLocalPermits(simulator(t), 1), func(c *workflow.WorkerConfig) { c.Name = name })
	// Well within RescueAfter (30 s), after which River would discard the job.
	counts := b.WaitSettled(t, 10*time.Second)
	require.Equal(t, 1, counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)
	// River records the job's end after the job returns.
	var errs []string
	require.Eventually(t, func() bool {
		var state string
		state, _, errs = b.jobOf(t)
		return state == "completed"
	}, 10*time.Second, 20*time.Millisecond)
	require.Contains(t, errs[len(errs)-1], "worker "+name+" restarted")
}

// TestStopMidJobLeavesTheLineToBeRetried: a worker stopped (a deploy) while a line's
// last attempt synthesizes. The job outlives the stop's grace period, River cancels
// its context, and the engine's error must not fail the line: the job goes back to
// the queue without spending its attempt, and the next worker renders the line.
// Before the fix the line failed with the engine's error.
func TestStopMidJobLeavesTheLineToBeRetried(t *testing.T) {
	t.Parallel()
	b := setupFault(t, 1)
	ctx := context.Background()
	b.renderOnLastAttempt(t)
	eng := newGatedEngine(t)
	w := b.startWorkerWith(t, workflow.NewLocalPermits(eng, 1), nil)
	eng.waitStarted(t)

	stopCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	require.NoError(t, w.Stop(stopCtx), "the hard stop that follows the grace period ends the job")
	got := b.Lines(t)[0]
	require.Equal(t, studio.StateQueued, got.State, "waiting for its retry, not failed: %s", got.LastError)
	state, attempt, _ := b.jobOf(t)
	require.Equal(t, "available", state)
	require.Zero(t, attempt, "the interrupted attempt is not spent")

	b.startWorkerWith(t, workflow.NewLocalPermits(simulator(t), 1), nil)
	counts := b.WaitSettled(t, 30*time.Second)
	require.Equal(t, 1, counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)
}

// TestSignalDoesNotCancelRunningJobs: the context a worker is started with is the
// signal's (SIGTERM). River took its end for a hard stop and cancelled every job at
// once, before Stop's grace period: the line on its last attempt failed. The job
// now runs on, and Stop lets it finish.
func TestSignalDoesNotCancelRunningJobs(t *testing.T) {
	t.Parallel()
	b := setupFault(t, 1)
	b.renderOnLastAttempt(t)
	eng := newGatedEngine(t)
	w, err := workflow.NewWorker(b.Pipeline, workflow.NewLocalPermits(eng, 1), faultWorkerConfig("signalled", b.DataDir),
		slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	sigCtx, signal := context.WithCancel(context.Background())
	require.NoError(t, w.Start(sigCtx))
	eng.waitStarted(t)

	signal()
	time.Sleep(300 * time.Millisecond)
	got := b.Lines(t)[0]
	require.Equal(t, studio.StateSynthesizing, got.State, "the synthesis runs on: %s", got.LastError)
	close(eng.gate)
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, w.Stop(stopCtx))
	got = b.Lines(t)[0]
	require.Contains(t, []studio.LineState{studio.StateDone, studio.StateNeedsReview}, got.State, got.LastError)
}
