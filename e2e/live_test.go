package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"dubstudio/live"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/web"
)

// liveBundle is a running app whose pages get live updates from a real listener.
type liveBundle struct {
	*testBundle
	listener *live.Listener
}

func setupLive(t *testing.T) *liveBundle {
	t.Helper()
	store := studiotest.Store(t)
	cfg := appConfig(t, t.TempDir())
	// A slow first retry, so that a change made while the listener is away is surely
	// missed and only the resync after reconnecting can show it.
	broker, l := startListener(t, store, live.ListenerConfig{MinBackoff: 600 * time.Millisecond, MaxBackoff: time.Second})
	srv := web.New(web.Deps{Config: cfg, Store: store, Logger: slog.New(slog.DiscardHandler), Live: broker})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.StopStreams) // before Close, which waits for the streams
	return &liveBundle{testBundle: &testBundle{store: store, server: ts, editor: studiotest.User(t, store, studio.RoleEditor)}, listener: l}
}

// startListener runs a real listener on store's database, publishing to a new
// broker, as the server's main does, until the test ends; it returns once the
// listener listens.
func startListener(t *testing.T, store *studio.Store, cfg live.ListenerConfig) (*live.Broker, *live.Listener) {
	t.Helper()
	broker := live.NewBroker(live.BrokerConfig{})
	l := live.NewListener(store.Pool(), broker, cfg)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }() //nolint:errcheck // nil when ctx ends
	t.Cleanup(func() { stop(); <-done })
	select {
	case <-l.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("the listener did not start")
	}
	return broker, l
}

func (b *liveBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.store.Pool().Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

func (b *liveBundle) setState(t *testing.T, lineID int64, state studio.LineState) {
	t.Helper()
	b.exec(t, "UPDATE lines SET state = $2, state_changed_at = now() WHERE id = $1", lineID, state)
}

// stateBadge selects the state badge of a line's row showing state.
func stateBadge(lineID int64, state studio.LineState) css {
	return css(fmt.Sprintf(`#line-%d [data-testid=line-state].st-%s`, lineID, state))
}

// TestLiveStatus opens a project and changes its lines in the database, as the render
// pipeline does: the rows' state badges and the progress bar follow without a reload,
// a row being edited keeps what the user typed, and losing the listener's connection
// ends in a reload of the table that shows what was missed.
func TestLiveStatus(t *testing.T) {
	b := setupLive(t)
	ctx := browser(t)
	p := studiotest.Project(t, b.store, b.editor, 4)
	lines, err := b.store.AllLines(context.Background(), p.ID)
	require.NoError(t, err)

	require.NoError(t, chromedp.Do(ctx, login(b.testBundle, b.editor)...))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/projects/%d", b.server.URL, p.ID)),
		chromedp.WaitVisible(css(`#live.connected [data-testid=live-status] .live-on`)),
	))
	// A marker that survives only as long as the page is not reloaded.
	_, err = chromedp.Run(ctx, chromedp.Evaluate[int](`window.__noReload = 7`))
	require.NoError(t, err)

	// One line through the pipeline, the others behind it.
	first := lines[0].ID
	for _, st := range []studio.LineState{studio.StateQueued, studio.StateSynthesizing, studio.StateDone} {
		b.setState(t, first, st)
		require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(stateBadge(first, st))), "line %d to show %s", first, st)
	}
	// A ticked row stays ticked for the bulk actions when it changes.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(fmt.Sprintf(`#line-%d input[name=line_id]`, lines[1].ID)))))
	b.setState(t, lines[1].ID, studio.StateSynthesizing)
	b.setState(t, lines[2].ID, studio.StateQueued)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(stateBadge(lines[1].ID, studio.StateSynthesizing)),
		chromedp.WaitVisible(stateBadge(lines[2].ID, studio.StateQueued)),
		chromedp.WaitVisible(css(`#project-progress .seg.st-done`)),
		chromedp.WaitVisible(css(`#project-progress .seg.st-synthesizing`)),
	))
	ticked, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector('#line-%d input[name=line_id]').checked`, lines[1].ID)))
	require.NoError(t, err)
	require.True(t, ticked)
	label, err := chromedp.Run(ctx, chromedp.Text(css(fmt.Sprintf(`#line-%d [data-testid=line-state]`, first))))
	require.NoError(t, err)
	require.Equal(t, "Done", label)
	swapped, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(
		`document.querySelectorAll('#lines tr tr').length === 0 && document.querySelectorAll('[id="line-%d"]').length === 1`, first)))
	require.NoError(t, err)
	require.True(t, swapped, "rows are replaced whole, not nested")
	screenshot(t, ctx, "live.png")

	// An editor is typing in the last row when its line changes and lines are added:
	// the table reloads around the open editor, which keeps the text.
	last := lines[3].ID
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(fmt.Sprintf(`#line-%d [data-testid=line-text]`, last))),
		chromedp.WaitVisible(css(`[data-testid=line-form] textarea`)),
		chromedp.SetValue(css(`[data-testid=line-form] textarea`), "Half-typed new wording"),
	))
	b.setState(t, last, studio.StateQueued)
	_, err = b.store.ImportLines(context.Background(), b.editor.ID, p.ID,
		[]studio.NewLine{{SourceLine: 1, StartMs: 60000, EndMs: 61000, Text: "A line added meanwhile."}})
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(css(`#lines tbody tr:nth-child(5)[data-testid=line-row]`)),
	))
	typed, err := chromedp.Run(ctx, chromedp.Value(css(`[data-testid=line-form] textarea`)))
	require.NoError(t, err)
	require.Equal(t, "Half-typed new wording", typed, "the open editor survived the reload")
	editing, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#lines tr.editing').length`))
	require.NoError(t, err)
	require.Equal(t, 1, editing)

	// The listener loses its connection; a change made meanwhile is not announced,
	// but the resync after reconnecting reloads the table with it.
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('lines').__before = true`))
	require.NoError(t, err)
	b.exec(t, "SELECT pg_terminate_backend($1)", int32(b.listener.BackendPID()))
	b.setState(t, lines[2].ID, studio.StateFailed)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById('lines').__before === undefined`))
	require.NoError(t, err, "the table reloaded after the reconnection")
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(stateBadge(lines[2].ID, studio.StateFailed))))

	marker, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.__noReload`))
	require.NoError(t, err)
	require.Equal(t, 7, marker, "every change arrived without reloading the page")
	fmt.Println("screenshot: e2e/artifacts/live.png")
}

// TestManagerDashboard opens a project's dashboard as a manager: the numbers, the
// throughput chart, and the numbers following the project's changes live.
func TestManagerDashboard(t *testing.T) {
	b := setupLive(t)
	ctx := browser(t)
	manager := studiotest.User(t, b.store, studio.RoleManager)
	p := studiotest.Project(t, b.store, manager, 12)
	lines, err := b.store.AllLines(context.Background(), p.ID)
	require.NoError(t, err)

	// Eight lines rendered over the last half hour, one failed, two on their way.
	sha := strings.Repeat("c", 64)
	b.exec(t, `INSERT INTO blobs (sha256, size_bytes, format, duration_ms, sample_rate, channels) VALUES ($1, 1, 'wav', 1500, 48000, 1)`, sha)
	for i, l := range lines[:8] {
		b.setState(t, l.ID, studio.StateDone)
		b.exec(t, `INSERT INTO takes (line_id, project_id, revision, render_seq, engine, spoken_text, audio_sha256, duration_ms, created_at)
			VALUES ($1, $2, 1, 1, 'sim', 'x', $3, 1500, now() - make_interval(mins => $4))`, l.ID, p.ID, sha, 1+i*4)
	}
	b.exec(t, `UPDATE lines SET state = 'failed', attempts = 3, last_error = '{"key":"error.internal"}' WHERE id = $1`, lines[8].ID)
	b.setState(t, lines[9].ID, studio.StateSynthesizing)
	b.setState(t, lines[10].ID, studio.StateQueued)

	require.NoError(t, chromedp.Do(ctx, login(b.testBundle, manager)...))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(b.server.URL+"/dashboard"),
		chromedp.WaitVisible(css(`[data-testid=dashboard-row]`)),
	))
	screenshot(t, ctx, "dashboard-overview.png")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`[data-testid=dashboard-project]`)),
		chromedp.WaitVisible(css(`#live.connected`)),
		chromedp.WaitVisible(css(`[data-testid=throughput-chart][data-ready=true] canvas`)),
	))
	failed, err := chromedp.Run(ctx, chromedp.Text(css(`[data-testid=tile-failed] .tile-value`)))
	require.NoError(t, err)
	require.Equal(t, "1", failed)
	screenshot(t, ctx, "dashboard.png")

	// Another failure: the numbers follow the project's event stream.
	b.exec(t, `UPDATE lines SET state = 'failed', attempts = 1, last_error = 'model host crashed' WHERE id = $1`, lines[11].ID)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](
		`document.querySelector('[data-testid=tile-failed] .tile-value').textContent.trim() === '2'`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(fmt.Sprintf(`[data-testid=failure][data-line-id="%d"]`, lines[11].ID)))))
	fmt.Println("screenshots: e2e/artifacts/dashboard-overview.png, e2e/artifacts/dashboard.png")
}
