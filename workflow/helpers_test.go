package workflow_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"dubstudio/audio"
	"dubstudio/tts"
	"dubstudio/workflow"
	"dubstudio/workflow/workflowtest"
)

// Shared setup of the package's external tests: a store on a fresh database, a
// pipeline, and workers started over local permits.

// testBundle is the shared bundle with the workers these tests start over it.
type testBundle struct{ *workflowtest.Bundle }

func setup(t *testing.T, lines int) *testBundle {
	t.Helper()
	return &testBundle{workflowtest.Setup(t, lines)}
}

type workerOpts struct {
	name    string
	engine  tts.Engine
	permits int
	bedDuck audio.DuckParams
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
		c.BedDuck = o.bedDuck
	})
}

func TestMain(m *testing.M) {
	if os.Getenv(victimEnv) != "" {
		runVictim()
		return
	}
	os.Exit(m.Run())
}
