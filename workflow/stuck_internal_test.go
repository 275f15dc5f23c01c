package workflow

import (
	"context"
	"errors"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/tts"
)

// failingPermits are permits whose Acquire fails with what acquire returns (no
// TryAcquire: the synthesis always waits in Acquire, as on a busy GPU host).
type failingPermits struct {
	Permits
	acquire func(ctx context.Context) error
}

func (f failingPermits) Acquire(ctx context.Context, _ PermitRequest) (Permit, error) {
	return nil, f.acquire(ctx)
}

// workLastAttempt works l's synthesize job once, as its last attempt, on a worker
// over permits, and returns the line afterwards.
func workLastAttempt(ctx context.Context, t *testing.T, permits Permits) (studio.Line, *rivertest.WorkResult, error) {
	t.Helper()
	store, project, w, lines := renderQueued(t, 1, 1)
	w.permits = permits
	l := lines[0]
	tx, err := store.Pool().Begin(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	synth := rivertest.NewWorker(t, riverpgxv5.New(store.Pool()), &river.Config{}, river.Worker[SynthesizeArgs](&synthesizeWorker{w: w}))
	res, werr := synth.Work(ctx, t, tx, SynthesizeArgs{LineID: l.ID, RenderSeq: l.RenderSeq, ProjectID: project.ID},
		&river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{}})
	got, err := store.Line(context.Background(), project.ID, l.ID)
	require.NoError(t, err)
	return *got, res, werr
}

// TestLastAttemptErrorFailsTheLine: an error that no step of the render records
// (here the permits', as a GPU host's pool that shut down returns) ends the job on
// its last attempt. Before the fix River discarded the job and the line stayed
// waiting for the GPU for good, with no job left to move it and no message.
func TestLastAttemptErrorFailsTheLine(t *testing.T) {
	t.Parallel()
	permits := failingPermits{Permits: NewLocalPermits(tts.NewEspeak(tts.EspeakConfig{}), 1),
		acquire: func(context.Context) error { return errors.New("the model host pool is closed") }}
	got, res, err := workLastAttempt(context.Background(), t, permits)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCancelled, res.EventKind, "River is told the render has failed for good")
	require.Equal(t, studio.StateFailed, got.State, "the line shows its render failed, not stuck in %s", got.State)
	require.Contains(t, got.LastError, "the model host pool is closed")
	require.Equal(t, 1, got.Attempts)
}

// TestLastAttemptPanicFailsTheLine: a panic in the render (a bug in an engine or
// a step) on its last attempt. River recovers it and discards the job; before the
// fix the line stayed waiting for the GPU for good.
func TestLastAttemptPanicFailsTheLine(t *testing.T) {
	t.Parallel()
	permits := failingPermits{Permits: NewLocalPermits(tts.NewEspeak(tts.EspeakConfig{}), 1),
		acquire: func(context.Context) error { panic("index out of range in the engine") }}
	got, res, err := workLastAttempt(context.Background(), t, permits)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCancelled, res.EventKind)
	require.Equal(t, studio.StateFailed, got.State, "the line shows its render failed, not stuck in %s", got.State)
	require.Contains(t, got.LastError, "index out of range in the engine")
	require.Contains(t, got.LastTraceback, "stuck_internal_test.go", "the stack is kept for the failure's detail")
}

// TestLastAttemptThatCannotRecordRunsAgain: the last attempt's failure cannot be
// written (the database refuses it: here a trigger, as a server going away would).
// River discarded the job and the line stayed active for good; the job is snoozed
// instead, without spending an attempt, and its next run records the failure.
func TestLastAttemptThatCannotRecordRunsAgain(t *testing.T) {
	t.Parallel()
	store, project, w, lines := renderQueued(t, 1, 1)
	w.permits = failingPermits{Permits: w.permits, acquire: func(context.Context) error { return errors.New("host lost") }}
	studiotest.Exec(t, store, `CREATE FUNCTION refuse_failed() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'the server is going away'; END $$`)
	studiotest.Exec(t, store, `CREATE TRIGGER refuse_failed BEFORE UPDATE ON lines FOR EACH ROW
		WHEN (NEW.state = 'failed') EXECUTE FUNCTION refuse_failed()`)
	l := lines[0]
	tx, err := store.Pool().Begin(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	synth := rivertest.NewWorker(t, riverpgxv5.New(store.Pool()), &river.Config{}, river.Worker[SynthesizeArgs](&synthesizeWorker{w: w}))
	work := func() river.EventKind {
		res, err := synth.Work(context.Background(), t, tx, SynthesizeArgs{LineID: l.ID, RenderSeq: l.RenderSeq, ProjectID: project.ID},
			&river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{}})
		require.NoError(t, err)
		return res.EventKind
	}
	require.Equal(t, river.EventKindJobSnoozed, work(), "the job comes back")
	studiotest.Exec(t, store, `DROP TRIGGER refuse_failed ON lines`)
	require.Equal(t, river.EventKindJobCancelled, work())
	got, err := store.Line(context.Background(), project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, studio.StateFailed, got.State)
	require.Contains(t, got.LastError, "host lost")
}

// TestLastAttemptTimeoutFailsTheLine: the job's context ends (its timeout, while it
// waited for a GPU) on its last attempt. The failure is recorded all the same,
// not with the context that has ended.
func TestLastAttemptTimeoutFailsTheLine(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	permits := failingPermits{Permits: NewLocalPermits(tts.NewEspeak(tts.EspeakConfig{}), 1),
		acquire: func(jctx context.Context) error {
			cancel(context.DeadlineExceeded) // the job's timeout, while it waited
			<-jctx.Done()
			return jctx.Err()
		}}
	got, _, _ := workLastAttempt(ctx, t, permits)
	require.Equal(t, studio.StateFailed, got.State, "the line shows its render failed, not stuck in %s", got.State)
	require.NotEmpty(t, got.LastError)
}

// TestEarlierAttemptErrorShowsQueued: on an attempt that River retries, the line
// waits in queued with the error, as for a failure a step records, not in the
// state of the step that failed (waiting for the GPU, which it no longer is).
func TestEarlierAttemptErrorShowsQueued(t *testing.T) {
	t.Parallel()
	store, project, w, lines := renderQueued(t, 1, 1)
	w.permits = failingPermits{Permits: w.permits, acquire: func(context.Context) error { return errors.New("host lost") }}
	l := lines[0]
	tx, err := store.Pool().Begin(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	synth := rivertest.NewWorker(t, riverpgxv5.New(store.Pool()), &river.Config{}, river.Worker[SynthesizeArgs](&synthesizeWorker{w: w}))
	_, err = synth.Work(context.Background(), t, tx, SynthesizeArgs{LineID: l.ID, RenderSeq: l.RenderSeq, ProjectID: project.ID},
		&river.InsertOpts{MaxAttempts: 3, UniqueOpts: river.UniqueOpts{}})
	require.Error(t, err)
	got, err := store.Line(context.Background(), project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, studio.StateQueued, got.State)
	require.Contains(t, got.LastError, "host lost")
}
