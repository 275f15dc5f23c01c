package workflow

import (
	"context"
	"database/sql"
	"os"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
)

// TestAnExportAttemptThatFailsWaitsQueued: an export whose attempt fails for a
// reason that may pass (here its take's audio is missing) is queued again with the
// error, not failed: the list stopped following a failed export, which River then
// retried, so a user saw "failed" for an export that went on to finish. Its last
// attempt fails it; an export that lacks takes fails at once, in the reader's
// language.
func TestAnExportAttemptThatFailsWaitsQueued(t *testing.T) {
	t.Parallel()
	b := setupRivertest(t, 1, 1)
	l := b.lines[0]
	b.workSynthesis(t, l, l.RenderSeq)
	b.requireTake(t, l)
	ctx := context.Background()
	got, err := b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	takes, err := b.store.TakesByIDs(ctx, []int64{*got.CurrentTakeID})
	require.NoError(t, err)
	audioPath, err := b.w.blobs.Path(takes[*got.CurrentTakeID].AudioSHA256)
	require.NoError(t, err)
	require.NoError(t, os.Remove(audioPath))

	worker := rivertest.NewWorker(t, b.driver, &river.Config{}, river.Worker[ExportArgs](&exportWorker{w: b.w}))
	create := func(opts studio.ExportOptions) *studio.Export {
		ex, err := b.store.CreateExport(ctx, b.project.ID, *b.project.CreatedBy, opts,
			func(context.Context, *sql.Tx, *studio.Export) error { return nil })
		require.NoError(t, err)
		return ex
	}
	work := func(ex *studio.Export, attempts int) (*studio.Export, river.EventKind) {
		res, _ := worker.Work(ctx, t, b.tx, ExportArgs{ExportID: ex.ID, ProjectID: b.project.ID},
			&river.InsertOpts{MaxAttempts: attempts, UniqueOpts: river.UniqueOpts{}})
		row, err := b.store.Export(ctx, b.project.ID, ex.ID)
		require.NoError(t, err)
		return row, res.EventKind
	}

	ex := create(studio.ExportOptions{})
	row, kind := work(ex, 3)
	require.Equal(t, river.EventKindJobFailed, kind, "River tries it again")
	require.Equal(t, studio.ExportQueued, row.State, "the export waits for its next attempt")
	require.Contains(t, row.Error, `"key":"export.internal"`)
	row, kind = work(ex, 1)
	require.Equal(t, river.EventKindJobCancelled, kind)
	require.Equal(t, studio.ExportFailed, row.State, "its last attempt fails it")

	row, kind = work(create(studio.ExportOptions{ApprovedOnly: true}), 3)
	require.Equal(t, river.EventKindJobCancelled, kind, "no approved take: nothing to try again")
	require.Equal(t, studio.ExportFailed, row.State)
	require.JSONEq(t, `{"key":"export.no_takes","args":null}`, row.Error)
}
