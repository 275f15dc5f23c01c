package workflow

import (
	"context"
	"log/slog"
	"os/exec"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/tts"
)

// InsertForTest inserts a job outside any transaction and reports whether River
// skipped it as a duplicate. Tests use it to check uniqueness.
func InsertForTest(ctx context.Context, p *Pipeline, args SynthesizeArgs) (bool, error) {
	res, err := p.inserter.Insert(ctx, args, nil)
	if err != nil {
		return false, err
	}
	return res.UniqueSkippedAsDuplicate, nil
}

// rivertestBundle is what the River worker tests work jobs with: a project whose
// lines are queued, a worker that is not started, and rivertest workers on its
// River workers, inserting their jobs in tx.
type rivertestBundle struct {
	store   *studio.Store
	project *studio.Project
	w       *Worker
	lines   []studio.Line
	driver  *riverpgxv5.Driver
	tx      pgx.Tx
	synth   *rivertest.Worker[SynthesizeArgs, pgx.Tx]
	fit     *rivertest.Worker[FitArgs, pgx.Tx]
}

// setupRivertest is renderQueued with rivertest workers for the synthesize and fit
// jobs.
func setupRivertest(t *testing.T, n, concurrentFits int) *rivertestBundle {
	t.Helper()
	ctx := context.Background()
	store, project, w, lines := renderQueued(t, n, concurrentFits)
	driver := riverpgxv5.New(store.Pool())
	tx, err := store.Pool().Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	cfg := &river.Config{}
	return &rivertestBundle{store: store, project: project, w: w, lines: lines, driver: driver, tx: tx,
		synth: rivertest.NewWorker(t, driver, cfg, river.Worker[SynthesizeArgs](&synthesizeWorker{w: w})),
		fit:   rivertest.NewWorker(t, driver, cfg, river.Worker[FitArgs](&fitWorker{w: w}))}
}

// workSynthesis works a synthesize job for l's render seq and requires it to complete.
func (b *rivertestBundle) workSynthesis(t *testing.T, l studio.Line, seq int) {
	t.Helper()
	res, err := b.synth.Work(context.Background(), t, b.tx, SynthesizeArgs{LineID: l.ID, RenderSeq: seq, ProjectID: b.project.ID},
		&river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
}

// requireTake requires l's render done with one take by espeak, its raw output kept.
func (b *rivertestBundle) requireTake(t *testing.T, l studio.Line) {
	t.Helper()
	ctx := context.Background()
	got, err := b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Contains(t, []studio.LineState{studio.StateDone, studio.StateNeedsReview}, got.State)
	require.NotNil(t, got.CurrentTakeID)
	takes, err := b.store.Takes(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Len(t, takes, 1)
	require.Equal(t, "espeak", takes[0].Engine)
	require.NotNil(t, takes[0].RawSHA256)
}

// renderQueued makes a project of n lines, queues their render and returns a worker
// with one espeak-ng permit and concurrentFits fits at once, not started: the tests
// work its jobs with rivertest.
func renderQueued(t *testing.T, n, concurrentFits int) (*studio.Store, *studio.Project, *Worker, []studio.Line) {
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
		WorkerConfig{Name: t.Name(), DataDir: t.TempDir(), ConcurrentFits: concurrentFits}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, w.ensureDirs())
	queued, err := p.RenderPending(context.Background(), project.ID)
	require.NoError(t, err)
	require.Equal(t, n, queued)
	lines, err := store.AllLines(context.Background(), project.ID)
	require.NoError(t, err)
	return store, project, w, lines
}
