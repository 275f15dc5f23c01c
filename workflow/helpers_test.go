package workflow_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/tts"
	"dubstudio/workflow"
)

// Shared setup of the package's external tests: a store on a fresh database, a
// pipeline, and workers started over local permits.

type testBundle struct {
	store    *studio.Store
	pipeline *workflow.Pipeline
	dataDir  string
	editor   *studio.User
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
	return &testBundle{store: store, pipeline: p, dataDir: t.TempDir(), editor: ed, project: studiotest.Project(t, store, ed, lines)}
}

type workerOpts struct {
	name    string
	engine  tts.Engine
	permits int
}

func (b *testBundle) startWorker(t *testing.T, o workerOpts) *workflow.Worker {
	t.Helper()
	if o.engine == nil {
		o.engine = tts.NewEspeak(tts.EspeakConfig{})
	}
	if o.name == "" {
		o.name = fmt.Sprintf("test-%d", time.Now().UnixNano())
	}
	return b.startWorkerWith(t, workflow.NewLocalPermits(o.engine, max(o.permits, 2)), func(c *workflow.WorkerConfig) {
		c.Name = o.name
		c.MaxAttempts = 0 // the worker's default
	})
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

func TestMain(m *testing.M) {
	if os.Getenv(victimEnv) != "" {
		runVictim()
		return
	}
	os.Exit(m.Run())
}
