package workflow_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/tts"
	"dubstudio/workflow"
	"dubstudio/workflow/workflowtest"
)

// victimEnv makes the test binary run as a worker process for the crash test.
const victimEnv = "DUBSTUDIO_TEST_VICTIM"

// runVictim is a worker process that works until it is killed.
func runVictim() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := studio.Connect(ctx, os.Getenv("DUBSTUDIO_TEST_DB"))
	if err != nil {
		panic(err)
	}
	store, err := studio.NewStore(pool)
	if err != nil {
		panic(err)
	}
	p, err := workflow.NewPipeline(store, slog.New(slog.DiscardHandler))
	if err != nil {
		panic(err)
	}
	w, err := workflow.NewWorker(p, workflow.NewLocalPermits(tts.NewEspeak(tts.EspeakConfig{}), 2), workflow.WorkerConfig{
		Name: os.Getenv(victimEnv), DataDir: os.Getenv("DUBSTUDIO_TEST_DATA"), FetchPollInterval: 100 * time.Millisecond,
		JobTimeout: 20 * time.Second, RescueAfter: 30 * time.Second, Heartbeat: 300 * time.Millisecond,
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	<-ctx.Done()
}

// TestWorkerKilledMidRender kills a worker process with SIGKILL in the middle of a
// 200-line render. A new worker takes over its jobs as soon as its heartbeat is seen
// to stop, and every line ends done exactly once.
func TestWorkerKilledMidRender(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: renders 200 lines")
	}
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng is not installed")
	}
	ctx := context.Background()
	store, url := studiotest.StoreWithURL(t)
	b := &testBundle{workflowtest.On(t, store, 200)}
	n, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	require.Equal(t, 200, n)

	victim := exec.Command(os.Args[0], "-test.run=^$")
	victim.Env = append(os.Environ(), victimEnv+"=victim", "DUBSTUDIO_TEST_DB="+url, "DUBSTUDIO_TEST_DATA="+b.DataDir)
	victim.Stdout, victim.Stderr = os.Stderr, os.Stderr
	require.NoError(t, victim.Start())
	t.Cleanup(func() {
		// Killed below already, unless the test failed before: either way it ends here.
		_ = victim.Process.Kill()
		_ = victim.Wait()
	})

	// Kill it once it is well into the render, with work in flight.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		counts, err := store.ProjectStateCounts(ctx, []int64{b.Project.ID})
		require.NoError(t, err)
		c := counts[b.Project.ID]
		var running int
		require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'running'`).Scan(&running))
		if c[studio.StateDone]+c[studio.StateNeedsReview] >= 30 && running > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the victim never got going: %v", c)
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, victim.Process.Signal(syscall.SIGKILL))
	var exit *exec.ExitError
	require.ErrorAs(t, victim.Wait(), &exit, "the victim dies of the signal")
	var held int
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'running'`).Scan(&held))
	require.Positive(t, held, "the victim died holding jobs")

	b.startWorker(t, workerOpts{name: "survivor"})
	counts := b.WaitSettled(t, 3*time.Minute)
	require.Equal(t, 200, counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)

	var takes, lines, mismatched int
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*), count(DISTINCT line_id) FROM takes`).Scan(&takes, &lines))
	require.Equal(t, 200, takes, "one take per line: nothing rendered twice into a second take")
	require.Equal(t, 200, lines)
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM lines l JOIN takes t ON t.id = l.current_take_id
		WHERE t.render_seq <> l.render_seq`).Scan(&mismatched))
	require.Zero(t, mismatched)
}

// TestDatabaseConnectionsLostMidRender terminates every connection of the worker to
// Postgres several times during a render; the render completes.
func TestDatabaseConnectionsLostMidRender(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	b := setup(t, 60)
	ctx := context.Background()
	b.startWorker(t, workerOpts{})
	_, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	admin := studiotest.AdminConn(t)
	var db string
	require.NoError(t, b.Store.Pool().QueryRow(ctx, `SELECT current_database()`).Scan(&db))
	for range 5 {
		time.Sleep(700 * time.Millisecond)
		_, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, db)
		require.NoError(t, err)
	}
	counts := b.WaitSettled(t, 3*time.Minute)
	require.Equal(t, 60, counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)
}
