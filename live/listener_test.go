package live_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/internal/testdb"
	"dubstudio/live"
)

// recorder is a Publisher that queues what it is told.
type recorder struct {
	events  chan live.Event
	resyncs chan struct{}
}

func (r *recorder) Publish(ev live.Event) { r.events <- ev }
func (r *recorder) ResyncAll()            { r.resyncs <- struct{}{} }

func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

func TestListenerPublishesAndReconnects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t)
	rec := &recorder{events: make(chan live.Event, 16), resyncs: make(chan struct{}, 4)}
	l := live.NewListener(pool, rec, live.ListenerConfig{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	var runErr error
	go func() { runErr = l.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })

	waitFor(t, l.Ready(), "the listener to listen")
	_, err := pool.Exec(ctx, `SELECT pg_notify('dubstudio_lines', '{"p":7,"l":70,"s":"done","r":3}')`)
	require.NoError(t, err)
	require.Equal(t, live.Event{Kind: live.KindLine, ProjectID: 7, LineID: 70, State: "done", Revision: 3},
		waitFor(t, rec.events, "a line event"))

	// A payload it cannot read is skipped, not fatal.
	_, err = pool.Exec(ctx, `SELECT pg_notify('dubstudio_lines', 'nonsense'), pg_notify('dubstudio_lines', '{"p":7,"all":true}')`)
	require.NoError(t, err)
	require.Equal(t, live.Event{Kind: live.KindResync, ProjectID: 7}, waitFor(t, rec.events, "a reload event"))

	// The backend goes away (as in a database restart): the listener comes back and
	// asks everyone to resync, since it may have missed notifications.
	pid := l.BackendPID()
	require.NotZero(t, pid)
	var killed bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&killed))
	require.True(t, killed)
	waitFor(t, rec.resyncs, "a resync after reconnecting")
	waitFor(t, l.Ready(), "the listener to listen again")
	require.NotEqual(t, pid, l.BackendPID(), "a new connection")

	_, err = pool.Exec(ctx, `SELECT pg_notify('dubstudio_lines', '{"p":7,"l":71,"s":"queued","r":1}')`)
	require.NoError(t, err)
	require.Equal(t, int64(71), waitFor(t, rec.events, "an event after reconnecting").LineID)

	// Stopping returns the connection to the pool, no longer listening.
	stop()
	waitFor(t, done, "Run to return")
	require.NoError(t, runErr)
	require.Zero(t, l.BackendPID())
	var listening int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND query ILIKE 'LISTEN%'`).Scan(&listening))
	require.Zero(t, listening)
}
