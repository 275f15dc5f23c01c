package fleet_test

import (
	"context"
	"log/slog"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/workflow"
)

// testBundle is a project with lines and a pipeline to render them, for the tests
// that run a worker over GPUs.
type testBundle struct {
	store    *studio.Store
	pipeline *workflow.Pipeline
	dataDir  string
	project  *studio.Project
}

func setup(t *testing.T, lines int) *testBundle {
	t.Helper()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng is not installed")
	}
	store := studiotest.Store(t)
	p, err := workflow.NewPipeline(store, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ed := studiotest.User(t, store, studio.RoleEditor)
	return &testBundle{store: store, pipeline: p, dataDir: t.TempDir(), project: studiotest.Project(t, store, ed, lines)}
}

// waitSettled waits until no line of the project is queued or running, failing the
// test if that does not happen within limit (a bound on a hang, not a timing claim).
func (b *testBundle) waitSettled(t *testing.T, limit time.Duration) studio.StateCounts {
	t.Helper()
	return studiotest.WaitSettled(t, b.store, b.project.ID, limit)
}

func (b *testBundle) lines(t *testing.T) []studio.Line {
	t.Helper()
	ls, err := b.store.AllLines(context.Background(), b.project.ID)
	require.NoError(t, err)
	return ls
}
