package workflow

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/tts"
)

// TestWorkersWithRivertest works lines through the synthesize and fit workers with
// River's rivertest, on the real database: a synthesis that fits its own take, one
// that hands it to a fit job because the worker's fits are backed up, and one run
// again after its worker died while fitting.
func TestWorkersWithRivertest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, project, w, lines := renderQueued(t, 4, 2)

	driver := riverpgxv5.New(store.Pool())
	cfg := &river.Config{}
	tx, err := store.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	synth := rivertest.NewWorker(t, driver, cfg, river.Worker[SynthesizeArgs](&synthesizeWorker{w: w}))
	fit := rivertest.NewWorker(t, driver, cfg, river.Worker[FitArgs](&fitWorker{w: w}))
	work := func(wk *rivertest.Worker[SynthesizeArgs, pgx.Tx], l studio.Line, seq int) {
		t.Helper()
		res, err := wk.Work(ctx, t, tx, SynthesizeArgs{LineID: l.ID, RenderSeq: seq, ProjectID: project.ID},
			&river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
		require.NoError(t, err)
		require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	}
	requireTake := func(l studio.Line) {
		t.Helper()
		got, _ := store.Line(ctx, project.ID, l.ID)
		require.Contains(t, []studio.LineState{studio.StateDone, studio.StateNeedsReview}, got.State)
		require.NotNil(t, got.CurrentTakeID)
		takes, _ := store.Takes(ctx, project.ID, l.ID)
		require.Len(t, takes, 1)
		require.Equal(t, "espeak", takes[0].Engine)
		require.NotNil(t, takes[0].RawSHA256)
	}

	// A fit slot is free: the synthesis fits its take itself, and no fit job is queued.
	work(synth, lines[0], lines[0].RenderSeq)
	requireTake(lines[0])
	rivertest.RequireNotInserted(ctx, t, driver, &FitArgs{}, nil)

	// Every fit slot is busy and as many syntheses wait for one: the take goes to a
	// fit job, which any worker works.
	w.fitClaims.Store(int32(2 * cap(w.fitSlots)))
	work(synth, lines[1], lines[1].RenderSeq)
	got, _ := store.Line(ctx, project.ID, lines[1].ID)
	require.Equal(t, studio.StateFitting, got.State)
	fitJob := rivertest.RequireInserted(ctx, t, driver, &FitArgs{}, nil)
	require.Equal(t, lines[1].ID, fitJob.Args.LineID)
	require.Equal(t, "espeak", fitJob.Args.Engine)
	w.fitClaims.Store(0)
	res, err := fit.Work(ctx, t, tx, *fitJob.Args, &river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	requireTake(lines[1])

	// Working the same render again (a retried job) adds no second take.
	_, err = fit.Work(ctx, t, tx, *fitJob.Args, &river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
	require.NoError(t, err)
	requireTake(lines[1])

	// A synthesis run again while its line is fitting (the worker died while it fitted
	// the take itself: River's rescue runs the job again) renders the line again.
	_, err = store.Pool().Exec(ctx, `UPDATE lines SET state = 'fitting' WHERE id = $1`, lines[2].ID)
	require.NoError(t, err)
	work(synth, lines[2], lines[2].RenderSeq)
	requireTake(lines[2])

	// A malformed fit job fails its line with the error instead of leaving it fitting.
	_, err = store.Pool().Exec(ctx, `UPDATE lines SET state = 'fitting' WHERE id = $1`, lines[3].ID)
	require.NoError(t, err)
	bad := *fitJob.Args
	bad.LineID, bad.RenderSeq, bad.RawSHA256 = lines[3].ID, lines[3].RenderSeq, "../not-a-blob"
	res, err = fit.Work(ctx, t, tx, bad, &river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCancelled, res.EventKind)
	failed, _ := store.Line(ctx, project.ID, lines[3].ID)
	require.Equal(t, studio.StateFailed, failed.State)
	require.Contains(t, failed.LastError, "render.internal")

	// A job for an older render is stale: it completes without touching the line.
	before, _ := store.Line(ctx, project.ID, lines[0].ID)
	work(synth, lines[0], lines[0].RenderSeq-1)
	again, _ := store.Line(ctx, project.ID, lines[0].ID)
	require.Equal(t, before.State, again.State)
	require.Equal(t, before.CurrentTakeID, again.CurrentTakeID)
	require.Len(t, w.fitSlots, 0) // every fit gave its slot back
	require.Zero(t, w.fitClaims.Load())
}

// TestSynthesisWaitsForAFitSlot: with every fit slot busy, a synthesis that may fit
// its own take waits for a slot, showing its line as fitting, and fits it once one
// frees.
func TestSynthesisWaitsForAFitSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, project, w, lines := renderQueued(t, 1, 1)
	line := lines[0]

	w.fitSlots <- struct{}{} // another fit holds the only slot
	tx, err := store.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	synth := rivertest.NewWorker(t, riverpgxv5.New(store.Pool()), &river.Config{}, river.Worker[SynthesizeArgs](&synthesizeWorker{w: w}))
	done := make(chan error, 1)
	go func() {
		res, err := synth.Work(ctx, t, tx, SynthesizeArgs{LineID: line.ID, RenderSeq: line.RenderSeq, ProjectID: project.ID},
			&river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
		if err == nil && res.EventKind != river.EventKindJobCompleted {
			err = fmt.Errorf("job ended with %s", res.EventKind)
		}
		done <- err
	}()
	require.Eventually(t, func() bool {
		got, err := store.Line(ctx, project.ID, line.ID)
		return err == nil && got.State == studio.StateFitting
	}, 30*time.Second, 20*time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the synthesis finished without a fit slot: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	require.Equal(t, int32(1), w.fitClaims.Load())

	<-w.fitSlots // the other fit ends
	require.NoError(t, <-done)
	got, err := store.Line(ctx, project.ID, line.ID)
	require.NoError(t, err)
	require.Contains(t, []studio.LineState{studio.StateDone, studio.StateNeedsReview}, got.State)
	require.NotNil(t, got.CurrentTakeID)
	rivertest.RequireNotInserted(ctx, t, riverpgxv5.New(store.Pool()), &FitArgs{}, nil)
	require.Zero(t, w.fitClaims.Load())
	require.Len(t, w.fitSlots, 0)
}

// renderQueued makes a project of n lines, queues their render and returns a worker
// with one espeak-ng slot and fitWorkers fit slots, not started: the tests work its
// jobs with rivertest.
func renderQueued(t *testing.T, n, fitWorkers int) (*studio.Store, *studio.Project, *Worker, []studio.Line) {
	t.Helper()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng is not installed")
	}
	store := studiotest.Store(t)
	p, err := NewPipeline(store, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ed := studiotest.User(t, store, studio.RoleEditor)
	project := studiotest.Project(t, store, ed, n)
	w, err := NewWorker(p, NewLocalPermits(tts.NewEspeak(tts.EspeakConfig{}), 1),
		WorkerConfig{Name: t.Name(), DataDir: t.TempDir(), FitWorkers: fitWorkers}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, w.ensureDirs())
	queued, err := p.RenderPending(context.Background(), project.ID)
	require.NoError(t, err)
	require.Equal(t, n, queued)
	lines, err := store.AllLines(context.Background(), project.ID)
	require.NoError(t, err)
	return store, project, w, lines
}
