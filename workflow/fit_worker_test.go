package workflow

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
)

// TestFitWorker works the fit job that a synthesis handed its take to (its worker's
// fits backed up) with River's rivertest, on the real database: once, again (a
// retried job), and malformed.
func TestFitWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRivertest(t, 2, 2)
	w, lines := b.w, b.lines

	w.fitClaims.Store(int32(2 * cap(w.fits)))
	b.workSynthesis(t, lines[0], lines[0].RenderSeq)
	fitJob := rivertest.RequireInserted(ctx, t, b.driver, &FitArgs{}, nil)
	w.fitClaims.Store(0)

	// Any worker works it.
	res, err := b.fit.Work(ctx, t, b.tx, *fitJob.Args, &river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	b.requireTake(t, lines[0])

	// Working the same render again (a retried job) adds no second take.
	_, err = b.fit.Work(ctx, t, b.tx, *fitJob.Args, &river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
	require.NoError(t, err)
	b.requireTake(t, lines[0])

	// A malformed fit job fails its line with the error instead of leaving it fitting.
	_, err = b.store.Pool().Exec(ctx, `UPDATE lines SET state = 'fitting' WHERE id = $1`, lines[1].ID)
	require.NoError(t, err)
	bad := *fitJob.Args
	bad.LineID, bad.RenderSeq, bad.RawSHA256 = lines[1].ID, lines[1].RenderSeq, "../not-a-blob"
	res, err = b.fit.Work(ctx, t, b.tx, bad, &river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCancelled, res.EventKind)
	failed, err := b.store.Line(ctx, b.project.ID, lines[1].ID)
	require.NoError(t, err)
	require.Equal(t, studio.StateFailed, failed.State)
	require.Contains(t, failed.LastError, "render.internal")
	require.Empty(t, w.fits) // every fit ended
	require.Zero(t, w.fitClaims.Load())
}

// TestSynthesisWaitsForAFit: with as many fits running as ConcurrentFits, a synthesis
// that may fit its own take waits for one to end, showing its line as fitting, and
// fits it then.
func TestSynthesisWaitsForAFit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, project, w, lines := renderQueued(t, 1, 1)
	line := lines[0]

	w.fits <- struct{}{} // another fit runs: the only one allowed
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
		t.Fatalf("the synthesis finished while the other fit ran: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	require.Equal(t, int32(1), w.fitClaims.Load())

	<-w.fits // the other fit ends
	require.NoError(t, <-done)
	got, err := store.Line(ctx, project.ID, line.ID)
	require.NoError(t, err)
	require.Contains(t, []studio.LineState{studio.StateDone, studio.StateNeedsReview}, got.State)
	require.NotNil(t, got.CurrentTakeID)
	rivertest.RequireNotInserted(ctx, t, riverpgxv5.New(store.Pool()), &FitArgs{}, nil)
	require.Zero(t, w.fitClaims.Load())
	require.Empty(t, w.fits)
}
