package web_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"dubstudio/live"
	"dubstudio/studio"
	"dubstudio/web"
)

// liveBundle is a testBundle whose server gets line changes from a real listener.
type liveBundle struct {
	*testBundle
	listener *live.Listener
	broker   *live.Broker
	web      *web.Server
}

func setupLive(t *testing.T) *liveBundle {
	t.Helper()
	b := setup(t)
	// A wider window than production's 100 ms: on a loaded 2-core CI machine the 43
	// notifications of one commit can take longer than that to read.
	broker := live.NewBroker(live.BrokerConfig{Window: 400 * time.Millisecond})
	l := live.NewListener(b.store.Pool(), broker, live.ListenerConfig{MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }() //nolint:errcheck // nil when ctx ends
	t.Cleanup(func() { stop(); <-done })

	srv := web.New(web.Deps{Config: b.cfg, Store: b.store, Logger: slog.New(slog.DiscardHandler), Live: broker})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.StopStreams) // first: Close waits for running handlers
	b.server = ts
	within(t, l.Ready(), "the listener to listen")
	return &liveBundle{testBundle: b, listener: l, broker: broker, web: srv}
}

// within waits for ch; the timeout only keeps a broken test from hanging.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

type sseEvent struct {
	ID   int64
	Name string
	Data string
}

func (e sseEvent) doc(t *testing.T) *goquery.Document {
	t.Helper()
	// A <tr> parses only inside a table.
	d, err := goquery.NewDocumentFromReader(strings.NewReader("<table><tbody>" + e.Data + "</tbody></table>"))
	require.NoError(t, err)
	return d
}

// sseStream reads an event stream as a browser's EventSource does.
type sseStream struct {
	resp   *http.Response
	events chan sseEvent
}

func (c *client) stream(path string, hdr map[string]string) *sseStream {
	c.t.Helper()
	resp := c.do("GET", path, nil, "", hdr)
	require.Equal(c.t, http.StatusOK, resp.StatusCode)
	s := &sseStream{resp: resp, events: make(chan sseEvent, 256)}
	go func() {
		defer close(s.events)
		r := bufio.NewReader(resp.Body)
		var ev sseEvent
		var data []string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSuffix(line, "\n")
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch {
			case line == "":
				if data != nil {
					ev.Data = strings.Join(data, "\n")
					s.events <- ev
				}
				ev, data = sseEvent{}, nil
			case field == "id":
				id, err := strconv.ParseInt(value, 10, 64)
				if err != nil {
					c.t.Errorf("event id %q: %v", value, err)
					return
				}
				ev.ID = id
			case field == "event":
				ev.Name = value
			case field == "data":
				data = append(data, value)
			}
		}
	}()
	return s
}

// next returns the next event called name, skipping others.
func (s *sseStream) next(t *testing.T, name string) sseEvent {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		var ev sseEvent
		var ok bool
		select {
		case ev, ok = <-s.events:
		case <-timeout:
			t.Fatalf("timed out waiting for event %s", name)
		}
		require.True(t, ok, "the stream ended while waiting for %s", name)
		if ev.Name == name || (strings.HasSuffix(name, "*") && strings.HasPrefix(ev.Name, strings.TrimSuffix(name, "*"))) {
			return ev
		}
	}
}

func (b *liveBundle) setState(t *testing.T, lineID int64, state studio.LineState) {
	t.Helper()
	_, err := b.store.Pool().Exec(context.Background(), "UPDATE lines SET state = $2, state_changed_at = now() WHERE id = $1", lineID, state)
	require.NoError(t, err)
}

func (b *liveBundle) lines(t *testing.T, projectID int64) []studio.Line {
	t.Helper()
	ls, err := b.store.AllLines(context.Background(), projectID)
	require.NoError(t, err)
	return ls
}

func TestLiveLineEventsInTheSubscribersLanguage(t *testing.T) {
	t.Parallel()
	b := setupLive(t)
	ctx := context.Background()
	path := fmt.Sprintf("/projects/%d/events", b.project.ID)
	require.NoError(t, b.store.SetUserLang(ctx, b.users[studio.RoleManager].ID, "zh"))

	en := b.as(t, studio.RoleEditor).stream(path, nil)
	zh := b.as(t, studio.RoleManager).stream(path, nil)
	h := en.resp.Header
	require.Equal(t, "text/event-stream", h.Get("Content-Type"))
	require.Equal(t, "no-cache", h.Get("Cache-Control"))
	require.Equal(t, "no", h.Get("X-Accel-Buffering"))

	// A change in another project comes first; this stream must not see it.
	other := b.lines(t, studiotestProject(t, b).ID)[0]
	b.setState(t, other.ID, studio.StateQueued)
	l := b.lines(t, b.project.ID)[1]
	b.setState(t, l.ID, studio.StateSynthesizing)

	ev := en.next(t, "line-*")
	require.Equal(t, fmt.Sprintf("line-%d", l.ID), ev.Name, "only this project's lines")
	d := ev.doc(t)
	row := d.Find(`tr[data-testid=line-row]`)
	require.Equal(t, 1, row.Length())
	require.Equal(t, "Synthesizing", strings.TrimSpace(row.Find(`[data-testid=line-state]`).Text()))
	require.Equal(t, ev.Name, row.AttrOr("sse-swap", ""), "the new row listens for its next change")
	require.Equal(t, "outerHTML", row.AttrOr("hx-swap", ""))
	require.Contains(t, row.Find(`.script-text`).Text(), `said with "quotes" & <brackets>.`, "text escaped as in the editor")

	zev := zh.next(t, fmt.Sprintf("line-%d", l.ID))
	require.Equal(t, "合成中", strings.TrimSpace(zev.doc(t).Find(`[data-testid=line-state]`).Text()))

	prog := en.next(t, "progress")
	require.Greater(t, prog.ID, ev.ID, "ids increase")
	pd, err := goquery.NewDocumentFromReader(strings.NewReader(prog.Data))
	require.NoError(t, err)
	require.Contains(t, pd.Find(`.badge.st-synthesizing`).Text(), "Synthesizing 1")
	require.Equal(t, 1, pd.Find(`[data-testid=progress] .seg.st-synthesizing`).Length())

	// queued -> synthesizing -> done, each as it commits.
	b.setState(t, l.ID, studio.StateDone)
	ev2 := en.next(t, fmt.Sprintf("line-%d", l.ID))
	require.Greater(t, ev2.ID, prog.ID)
	require.Equal(t, "Done", strings.TrimSpace(ev2.doc(t).Find(`[data-testid=line-state]`).Text()))
}

// studiotestProject makes a second project in the bundle's database.
func studiotestProject(t *testing.T, b *liveBundle) *studio.Project {
	t.Helper()
	p, err := b.store.CreateProject(context.Background(), "Other", &b.users[studio.RoleEditor].ID)
	require.NoError(t, err)
	_, err = b.store.ImportLines(context.Background(), b.users[studio.RoleEditor].ID, p.ID,
		[]studio.NewLine{{SourceLine: 1, StartMs: 0, EndMs: 1000, Text: "Elsewhere."}})
	require.NoError(t, err)
	return p
}

func TestLiveResyncWhenLinesAreAddedAndOnReconnect(t *testing.T) {
	t.Parallel()
	b := setupLive(t)
	c := b.as(t, studio.RoleEditor)
	path := fmt.Sprintf("/projects/%d/events", b.project.ID)
	s := c.stream(path, nil)

	_, err := b.store.ImportLines(context.Background(), b.users[studio.RoleEditor].ID, b.project.ID,
		[]studio.NewLine{{SourceLine: 1, StartMs: 90000, EndMs: 91000, Text: "One more."}})
	require.NoError(t, err)
	ev := s.next(t, "resync")
	require.NotEmpty(t, ev.Data, "an event without data is never dispatched")
	require.Contains(t, s.next(t, "progress").Data, "Draft 4")

	// A browser reconnecting on its own says what it saw last: it is told to reload
	// first, and the ids carry on from there.
	again := c.stream(path, map[string]string{"Last-Event-ID": "41"})
	ev = again.next(t, "*")
	require.Equal(t, "resync", ev.Name)
	require.Equal(t, int64(42), ev.ID)
}

func TestLiveStreamsSurviveTheListenerLosingItsConnection(t *testing.T) {
	t.Parallel()
	b := setupLive(t)
	s := b.as(t, studio.RoleEditor).stream(fmt.Sprintf("/projects/%d/events", b.project.ID), nil)

	var killed bool
	err := b.store.Pool().QueryRow(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query ILIKE 'LISTEN%'`).Scan(&killed)
	require.NoError(t, err)
	require.True(t, killed)

	// Back: everyone reloads, since changes made meanwhile were not announced.
	s.next(t, "resync")
	within(t, b.listener.Ready(), "the listener to listen again")
	l := b.lines(t, b.project.ID)[0]
	b.setState(t, l.ID, studio.StateQueued)
	ev := s.next(t, fmt.Sprintf("line-%d", l.ID))
	require.Equal(t, "Queued", strings.TrimSpace(ev.doc(t).Find(`[data-testid=line-state]`).Text()))
}

func TestLiveStreamsEndOnShutdown(t *testing.T) {
	t.Parallel()
	b := setupLive(t)
	s := b.as(t, studio.RoleEditor).stream(fmt.Sprintf("/projects/%d/events", b.project.ID), nil)
	b.web.StopStreams()
	// The server must end the stream: the events channel closes once the body ends.
	deadline := time.After(20 * time.Second)
	for {
		select {
		case _, open := <-s.events:
			if !open {
				return
			}
		case <-deadline:
			t.Fatal("the stream was still open 20 s after StopStreams")
		}
	}
}

func TestLiveStreamAccess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := fmt.Sprintf("/projects/%d/events", b.project.ID)
	resp := b.anon(t).get(path)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/login?next="))
	require.Equal(t, http.StatusNotFound, b.as(t, studio.RoleEditor).get("/projects/999999/events").StatusCode)
}

func TestLiveBurstBecomesOneResync(t *testing.T) {
	t.Parallel()
	b := setupLive(t)
	s := b.as(t, studio.RoleEditor).stream(fmt.Sprintf("/projects/%d/events", b.project.ID), nil)
	more := make([]studio.NewLine, 40)
	for i := range more {
		more[i] = studio.NewLine{SourceLine: i + 1, StartMs: 100000 + i*1000, EndMs: 100500 + i*1000, Text: fmt.Sprintf("Extra %d.", i)}
	}
	_, err := b.store.ImportLines(context.Background(), b.users[studio.RoleEditor].ID, b.project.ID, more)
	require.NoError(t, err)
	require.Equal(t, "resync", s.next(t, "*").Name, "an import reloads")

	// A render request queues every line in one commit: one reload, not 43 rows.
	_, err = b.store.Pool().Exec(context.Background(), "UPDATE lines SET state = 'queued' WHERE project_id = $1", b.project.ID)
	require.NoError(t, err)
	resync, progress := false, false
	for !resync || !progress {
		ev := s.next(t, "*")
		require.False(t, strings.HasPrefix(ev.Name, "line-"), "no rows for a burst, got %s", ev.Name)
		resync = resync || ev.Name == "resync"
		progress = progress || (ev.Name == "progress" && strings.Contains(ev.Data, "Queued 43"))
	}
}

// TestLiveStreamResyncsWhatChangedBeforeItConnected: a line that changes after the
// editor's page read its lines and before the page's event stream subscribed was
// never sent: its row kept the old state until the line changed again. The page's
// stream names the live mark taken before the lines were read, and a change since
// is answered with a resync first; with none, the stream starts with what comes.
func TestLiveStreamResyncsWhatChangedBeforeItConnected(t *testing.T) {
	t.Parallel()
	b := setupLive(t)
	c := b.as(t, studio.RoleEditor)
	streamOf := func() (path, mark string) {
		resp := c.do("GET", fmt.Sprintf("/projects/%d", b.project.ID), nil, "", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		path, ok := doc(t, resp).Find(`[data-testid=live]`).Attr("sse-connect")
		require.True(t, ok)
		u, err := url.Parse(path)
		require.NoError(t, err)
		require.NotEmpty(t, u.Query().Get("mark"))
		return path, u.Query().Get("mark")
	}
	l := b.lines(t, b.project.ID)[0]

	path, mark := streamOf()
	b.setState(t, l.ID, studio.StateDone) // after the page, before its stream
	require.Eventually(t, func() bool { return b.broker.Changed(b.project.ID, mark) },
		20*time.Second, 10*time.Millisecond, "the change reaches the broker")
	require.Equal(t, "resync", c.stream(path, nil).next(t, "*").Name, "the page reloads its table")

	path, _ = streamOf()
	s := c.stream(path, nil)
	b.setState(t, l.ID, studio.StateNeedsReview)
	first := s.next(t, "*")
	require.NotEqual(t, "resync", first.Name, "nothing changed before the stream")
	if first.Name != fmt.Sprintf("line-%d", l.ID) {
		s.next(t, fmt.Sprintf("line-%d", l.ID))
	}
}
