package workflow

import (
	"context"
	"testing"

	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
)

// TestSynthesizeWorker works lines through the synthesize worker with River's
// rivertest, on the real database: a synthesis that fits its own take, one that
// hands it to a fit job because the worker's fits are backed up, one run again after
// its worker died while fitting, and a stale one.
func TestSynthesizeWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRivertest(t, 3, 2)
	w, lines := b.w, b.lines

	// A fit is free: the synthesis fits its take itself, and no fit job is queued.
	b.workSynthesis(t, lines[0], lines[0].RenderSeq)
	b.requireTake(t, lines[0])
	rivertest.RequireNotInserted(ctx, t, b.driver, &FitArgs{}, nil)

	// Every fit is busy and as many syntheses wait for one: the take goes to a fit
	// job (fit_worker_test.go works it), inserted as the line moves on to fitting.
	w.fitClaims.Store(int32(2 * cap(w.fits)))
	b.workSynthesis(t, lines[1], lines[1].RenderSeq)
	got, err := b.store.Line(ctx, b.project.ID, lines[1].ID)
	require.NoError(t, err)
	require.Equal(t, studio.StateFitting, got.State)
	fitJob := rivertest.RequireInserted(ctx, t, b.driver, &FitArgs{}, nil)
	require.Equal(t, lines[1].ID, fitJob.Args.LineID)
	require.Equal(t, "espeak", fitJob.Args.Engine)
	w.fitClaims.Store(0)

	// A synthesis run again while its line is fitting (the worker died while it fitted
	// the take itself: River's rescue runs the job again) renders the line again.
	_, err = b.store.Pool().Exec(ctx, `UPDATE lines SET state = 'fitting' WHERE id = $1`, lines[2].ID)
	require.NoError(t, err)
	b.workSynthesis(t, lines[2], lines[2].RenderSeq)
	b.requireTake(t, lines[2])

	// A job for an older render is stale: it completes without touching the line.
	before, err := b.store.Line(ctx, b.project.ID, lines[0].ID)
	require.NoError(t, err)
	b.workSynthesis(t, lines[0], lines[0].RenderSeq-1)
	again, err := b.store.Line(ctx, b.project.ID, lines[0].ID)
	require.NoError(t, err)
	require.Equal(t, before.State, again.State)
	require.Equal(t, before.CurrentTakeID, again.CurrentTakeID)
	require.Empty(t, w.fits) // every fit ended
	require.Zero(t, w.fitClaims.Load())
}
