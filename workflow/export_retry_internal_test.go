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
	"dubstudio/studio/studiotest"
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

// newExport creates an export of b's project, its job left to the test.
func (b *rivertestBundle) newExport(t *testing.T) *studio.Export {
	t.Helper()
	ex, err := b.store.CreateExport(context.Background(), b.project.ID, *b.project.CreatedBy, studio.ExportOptions{},
		func(context.Context, *sql.Tx, *studio.Export) error { return nil })
	require.NoError(t, err)
	return ex
}

// lastAttemptExport works a job of export ex once, as its last attempt, with build
// in place of buildExport (nil: buildExport), and returns the export's row after it.
func (b *rivertestBundle) lastAttemptExport(t *testing.T, ex *studio.Export, build buildExportFunc) (*studio.Export, river.EventKind) {
	t.Helper()
	ctx := context.Background()
	worker := rivertest.NewWorker(t, b.driver, &river.Config{}, river.Worker[ExportArgs](&exportWorker{w: b.w, build: build}))
	res, _ := worker.Work(ctx, t, b.tx, ExportArgs{ExportID: ex.ID, ProjectID: b.project.ID},
		&river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{}})
	row, err := b.store.Export(ctx, b.project.ID, ex.ID)
	require.NoError(t, err)
	return row, res.EventKind
}

// TestALastAttemptExportThatPanicsFails: a panic while the archive is built (a bug)
// on the export's last attempt. River recovered it and discarded the job, and the
// export stayed running at 95% for good; it fails, with the panic.
func TestALastAttemptExportThatPanicsFails(t *testing.T) {
	t.Parallel()
	b := setupRivertest(t, 1, 1)
	row, kind := b.lastAttemptExport(t, b.newExport(t), func(ctx context.Context, ex *studio.Export) (int, int64, []studio.LeftOutLine, error) {
		require.NoError(t, b.store.ExportProgress(ctx, ex.ID, 95))
		panic("index out of range in the manifest")
	})
	require.Equal(t, river.EventKindJobCancelled, kind)
	require.Equal(t, studio.ExportFailed, row.State, "not left %s", row.State)
	require.Contains(t, row.Error, "index out of range in the manifest")
}

// TestALastAttemptExportThatCannotRecordRunsAgain: the export's archive is built on
// its last attempt and its outcome cannot be written (the database refuses it: here
// a trigger). River discarded the job and the export stayed running for good; the
// job is snoozed instead, without spending an attempt, and its next run records it.
func TestALastAttemptExportThatCannotRecordRunsAgain(t *testing.T) {
	t.Parallel()
	b := setupRivertest(t, 1, 1)
	l := b.lines[0]
	b.workSynthesis(t, l, l.RenderSeq)
	studiotest.Exec(t, b.store, `CREATE FUNCTION refuse_done() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'the server is going away'; END $$`)
	studiotest.Exec(t, b.store, `CREATE TRIGGER refuse_done BEFORE UPDATE ON exports FOR EACH ROW
		WHEN (NEW.state IN ('done', 'failed')) EXECUTE FUNCTION refuse_done()`)
	ex := b.newExport(t)
	row, kind := b.lastAttemptExport(t, ex, nil)
	require.Equal(t, river.EventKindJobSnoozed, kind, "the job comes back")
	require.Equal(t, studio.ExportRunning, row.State)

	studiotest.Exec(t, b.store, `DROP TRIGGER refuse_done ON exports`)
	row, kind = b.lastAttemptExport(t, ex, nil)
	require.Equal(t, river.EventKindJobCompleted, kind)
	require.Equal(t, studio.ExportDone, row.State, row.Error)
}
