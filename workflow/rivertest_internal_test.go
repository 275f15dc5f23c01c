package workflow

import (
	"context"
	"log/slog"
	"os/exec"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/tts"
)

// TestWorkersWithRivertest works one line through the synthesize and fit workers
// with River's rivertest, on the real database.
func TestWorkersWithRivertest(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng is not installed")
	}
	ctx := context.Background()
	store := studiotest.Store(t)
	p, err := NewPipeline(store, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ed := studiotest.User(t, store, studio.RoleEditor)
	project := studiotest.Project(t, store, ed, 1)
	w, err := NewWorker(p, NewLocalSlots(tts.NewEspeak(tts.EspeakConfig{}), 1), WorkerConfig{Name: "rivertest", DataDir: t.TempDir()},
		slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, w.ensureDirs())

	n, err := p.RenderPending(ctx, project.ID)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	lines, _ := store.AllLines(ctx, project.ID)
	line := lines[0]

	driver := riverpgxv5.New(store.Pool())
	cfg := &river.Config{}
	tx, err := store.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)

	synth := rivertest.NewWorker(t, driver, cfg, river.Worker[SynthesizeArgs](&synthesizeWorker{w: w}))
	res, err := synth.Work(ctx, t, tx, SynthesizeArgs{LineID: line.ID, RenderSeq: line.RenderSeq, ProjectID: project.ID},
		&river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	got, _ := store.Line(ctx, project.ID, line.ID)
	require.Equal(t, studio.StateFitting, got.State)
	fitJob := rivertest.RequireInserted(ctx, t, driver, &FitArgs{}, nil)
	require.Equal(t, line.ID, fitJob.Args.LineID)
	require.Equal(t, "espeak", fitJob.Args.Engine)

	fit := rivertest.NewWorker(t, driver, cfg, river.Worker[FitArgs](&fitWorker{w: w}))
	res, err = fit.Work(ctx, t, tx, *fitJob.Args, &river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	got, _ = store.Line(ctx, project.ID, line.ID)
	require.Contains(t, []studio.LineState{studio.StateDone, studio.StateNeedsReview}, got.State)
	require.NotNil(t, got.CurrentTakeID)

	// Working the same render again (a retried job) adds no second take.
	_, err = fit.Work(ctx, t, tx, *fitJob.Args, &river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
	require.NoError(t, err)
	takes, _ := store.Takes(ctx, project.ID, line.ID)
	require.Len(t, takes, 1)

	// A job for an older render is stale: it completes without touching the line.
	stale, err := synth.Work(ctx, t, tx, SynthesizeArgs{LineID: line.ID, RenderSeq: line.RenderSeq - 1, ProjectID: project.ID},
		&river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, stale.EventKind)
	again, _ := store.Line(ctx, project.ID, line.ID)
	require.Equal(t, got.State, again.State)
}
