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
	"dubstudio/tts"
	"dubstudio/web"
	"dubstudio/workflow"
)

// setupApp runs the whole app as `dubstudio serve` does: web server, live listener,
// pipeline and an embedded worker on the espeak-ng engine.
func setupApp(t *testing.T) *testBundle {
	t.Helper()
	store := studiotest.Store(t)
	dataDir := t.TempDir()
	cfg := appConfig(t, dataDir)
	logger := slog.New(slog.DiscardHandler)

	broker := live.NewBroker(live.BrokerConfig{})
	l := live.NewListener(store.Pool(), broker, live.ListenerConfig{})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }() //nolint:errcheck // nil when ctx ends
	t.Cleanup(func() { stop(); <-done })

	p, err := workflow.NewPipeline(store, logger)
	require.NoError(t, err)
	w, err := workflow.NewWorker(p, workflow.NewLocalPermits(tts.NewEspeak(tts.EspeakConfig{}), 2), workflow.WorkerConfig{
		Name: "e2e", DataDir: dataDir, FetchPollInterval: 100 * time.Millisecond}, logger)
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, w.Stop(c))
	})

	srv := web.New(web.Deps{Config: cfg, Store: store, Logger: logger, Live: broker, Renderer: p, Exporter: p})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.StopStreams)
	select {
	case <-l.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("the listener did not start")
	}
	return &testBundle{store: store, server: ts, editor: studiotest.User(t, store, studio.RoleEditor)}
}

// TestRenderOverSSE starts a real render from the editor and watches the rows go
// through their states to done over Server-Sent Events, without reloading the page.
func TestRenderOverSSE(t *testing.T) {
	b := setupApp(t)
	project := studiotest.Project(t, b.store, b.editor, 8)
	ctx := browser(t)
	require.NoError(t, chromedp.Do(ctx, login(b, b.editor)...))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/projects/%d", b.server.URL, project.ID)),
		chromedp.WaitVisible(css(`[data-testid=render-pending]`)),
	))
	// Record every state each row shows, and mark the page to detect a reload.
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		window.__noReload = true;
		window.__seen = {};
		const note = () => document.querySelectorAll('[data-testid=line-row]').forEach(r => {
			const s = r.querySelector('[data-testid=line-state]').className;
			(window.__seen[r.id] = window.__seen[r.id] || new Set()).add(s.replace('badge st-', ''));
		});
		new MutationObserver(note).observe(document.body, {subtree: true, childList: true});
		note();
		return true;
	})()`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(`[data-testid=render-pending]`))))
	text, class := notice(t, ctx, "Queued")
	require.Equal(t, "Queued 8 lines.", text)
	require.Contains(t, class, "ok")

	deadline := time.Now().Add(2 * time.Minute)
	for {
		done, err := chromedp.Run(ctx, chromedp.Evaluate[int](
			`document.querySelectorAll('[data-testid=line-row] [data-testid=line-state].st-done, [data-testid=line-row] [data-testid=line-state].st-needs_review').length`))
		require.NoError(t, err)
		if done == 8 {
			break
		}
		require.True(t, time.Now().Before(deadline), "only %d rows done", done)
		time.Sleep(100 * time.Millisecond)
	}
	still, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__noReload === true`))
	require.NoError(t, err)
	require.True(t, still, "the page was never reloaded")
	seen, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...new Set(Object.values(window.__seen).flatMap(s => [...s]))].sort()`))
	require.NoError(t, err)
	require.Contains(t, seen, "draft")
	require.Contains(t, seen, "done")
	require.GreaterOrEqual(t, len(seen), 3, "rows passed through intermediate states: %v", seen)
	plays, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=line-row] button[data-play-url]').length`))
	require.NoError(t, err)
	require.Equal(t, 8, plays, "each row offers its take")
	screenshot(t, ctx, "render.png")

	// Nothing left to render: said as such, without the success colour.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(`[data-testid=render-pending]`))))
	text, class = notice(t, ctx, "Nothing")
	require.Equal(t, "Nothing to queue: no line here is waiting to be rendered.", text)
	require.NotContains(t, class, "ok")
}

// notice waits for the project page's notice to start with prefix and returns its
// text and class.
func notice(t *testing.T, ctx context.Context, prefix string) (string, string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
			const n = document.querySelector('[data-testid=notice]');
			return n ? [n.textContent.trim(), n.className] : ['', ''];
		})()`))
		require.NoError(t, err)
		if strings.HasPrefix(got[0], prefix) {
			return got[0], got[1]
		}
		require.True(t, time.Now().Before(deadline), "notice %q, waiting for %q", got[0], prefix)
		time.Sleep(100 * time.Millisecond)
	}
}
