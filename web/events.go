package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"dubstudio/live"
	"dubstudio/studio"
	"dubstudio/views"
)

// Live status. An open project page keeps one Server-Sent Events stream
// (GET /projects/:pid/events) on which the server pushes, as htmx-ready HTML:
//   - line-<id>: the line's row, re-rendered from the database, when it changed;
//   - progress: the project's progress bar, at most every sseProgressEvery;
//   - resync: reload the table (lines were added or removed, events were lost, or the
//     browser reconnected and may have missed some), at most every sseResyncEvery.
//
// Every event has an increasing id; a browser that reconnects by itself sends the last
// one as Last-Event-ID and is answered with a resync first. A page's first connection
// names the live mark taken before the page read its lines (?mark=, live.Broker.Mark),
// and is answered with a resync first when a line changed in between: the stream's
// subscription did not exist yet to carry it.
const (
	ssePingEvery = 30 * time.Second
	// sseSessionEvery is how often an open stream checks that its session still
	// stands: logout, a disabled user, a password reset end it within this time.
	sseSessionEvery  = 2 * time.Second
	sseProgressEvery = 250 * time.Millisecond
	sseResyncEvery   = time.Second
	sseRetry         = 2 * time.Second
)

// sseWriter writes events in the text/event-stream format.
type sseWriter struct {
	w   *echo.Response
	rc  *http.ResponseController
	id  int64
	buf bytes.Buffer
}

// event writes one named event. Each line of data becomes a data: line; carriage
// returns are line ends in SSE, so they become newlines first.
func (s *sseWriter) event(name string, data []byte) error {
	s.id++
	s.buf.Reset()
	fmt.Fprintf(&s.buf, "id: %d\nevent: %s\n", s.id, name)
	data = bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
	for line := range bytes.SplitSeq(bytes.TrimRight(data, "\n"), []byte("\n")) {
		s.buf.WriteString("data: ")
		s.buf.Write(line)
		s.buf.WriteByte('\n')
	}
	s.buf.WriteByte('\n')
	_, err := s.w.Write(s.buf.Bytes())
	return err
}

// comment writes a line that clients ignore, to keep proxies from closing the stream.
func (s *sseWriter) comment(text string) error {
	_, err := fmt.Fprintf(s.w, ": %s\n\n", text)
	return err
}

func (s *sseWriter) flush() error { return s.rc.Flush() }

// lastEventID reads the Last-Event-ID a reconnecting browser sends.
func lastEventID(c echo.Context) (int64, bool) {
	v := c.Request().Header.Get("Last-Event-ID")
	if v == "" {
		return 0, false
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 0 {
		return 0, true
	}
	return id, true
}

// streamEvents serves a project's live status until the browser leaves, the server
// shuts down or writing fails. ?rows=0 leaves out line rows (for the dashboard).
func (s *Server) streamEvents(c echo.Context) error {
	p, err := s.project(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	sub := s.live.Subscribe(p.ID)
	defer sub.Close()

	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	c.Response().WriteHeader(http.StatusOK)

	last, resumed := lastEventID(c)
	mark := c.QueryParam("mark")
	st := newLiveStream(s, c, p.ID, last)
	defer st.stop()
	if _, err := fmt.Fprintf(c.Response(), "retry: %d\n\n", sseRetry.Milliseconds()); err != nil {
		return nil
	}
	if resumed || mark != "" && s.live.Changed(p.ID, mark) {
		// Whatever happened while the browser was away, or since the page read its
		// lines, it did not see.
		if err := st.handle(ctx, live.Event{Kind: live.KindResync, ProjectID: p.ID}); err != nil {
			return nil
		}
	}
	if err := st.w.flush(); err != nil {
		return nil
	}

	ping := time.NewTicker(ssePingEvery)
	defer ping.Stop()
	check := time.NewTicker(sseSessionEvery)
	defer check.Stop()
	token, role := "", currentUser(c).Role
	if ck, err := c.Cookie(sessionCookie); err == nil {
		token = ck.Value
	}
	for {
		var err error
		select {
		case <-ctx.Done():
			return nil
		case <-check.C:
			if !s.streamMayGoOn(ctx, token, role, p.ID) {
				return nil
			}
		case <-s.streams.Done():
			return nil
		case <-ping.C:
			err = st.w.comment("ping")
		case ev := <-sub.C():
			err = st.handle(ctx, ev)
		case <-st.progress.C:
			st.progressArmed = false
			err = st.sendProgress(ctx)
		case <-st.resync.C:
			err = st.sendResync()
		}
		if err == nil {
			err = st.w.flush()
		}
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				s.logger.DebugContext(ctx, "event stream ended", "project", p.ID, "err", err)
			}
			return nil
		}
	}
}

// liveStream is one subscriber's side of the live status.
type liveStream struct {
	s         *Server
	c         echo.Context
	w         *sseWriter
	page      views.Page
	projectID int64
	rows      bool

	// At most one progress bar per sseProgressEvery: the first change shows at once,
	// the changes of a burst after it once more at the end.
	progress      *time.Timer
	progressArmed bool
	progressAt    time.Time
	// At most one reload per sseResyncEvery, however busy the project: meanwhile rows
	// are not sent, since the coming reload shows them.
	resync        *time.Timer
	resyncPending bool
	resyncAt      time.Time
}

func newLiveStream(s *Server, c echo.Context, projectID, lastID int64) *liveStream {
	st := &liveStream{s: s, c: c, page: s.page(c, "", ""), projectID: projectID, rows: c.QueryParam("rows") != "0",
		w:        &sseWriter{w: c.Response(), rc: http.NewResponseController(c.Response().Writer), id: lastID},
		progress: time.NewTimer(time.Hour), resync: time.NewTimer(time.Hour)}
	st.progress.Stop()
	st.resync.Stop()
	return st
}

func (st *liveStream) stop() {
	st.progress.Stop()
	st.resync.Stop()
}

// handle sends what an event calls for. Only failures to write end the stream: a
// failed query is logged and the browser catches up with the next event.
func (st *liveStream) handle(ctx context.Context, ev live.Event) error {
	if !st.progressArmed {
		st.progress.Reset(max(0, sseProgressEvery-time.Since(st.progressAt)))
		st.progressArmed = true
	}
	switch {
	case st.resyncPending:
		return nil // the coming reload shows it
	case ev.Kind == live.KindResync:
		if wait := sseResyncEvery - time.Since(st.resyncAt); wait > 0 {
			st.resyncPending = true
			st.resync.Reset(wait)
			return nil
		}
		return st.sendResync()
	case ev.Kind == live.KindLine && st.rows:
		html, err := st.renderLine(ctx, ev.LineID)
		switch {
		case errors.Is(err, studio.ErrNotFound):
			return nil // deleted since: its project's reload notice follows
		case err != nil:
			st.logError(ctx, "error rendering a live line", err)
			return nil
		}
		return st.w.event("line-"+strconv.FormatInt(ev.LineID, 10), html)
	}
	return nil
}

func (st *liveStream) sendResync() error {
	st.resyncPending, st.resyncAt = false, time.Now()
	// The data is not used, but an event without data is never dispatched.
	return st.w.event("resync", []byte("resync"))
}

func (st *liveStream) renderLine(ctx context.Context, lineID int64) ([]byte, error) {
	l, err := st.s.store.Line(ctx, st.projectID, lineID)
	if err != nil {
		return nil, err
	}
	v, err := st.s.lineView(st.c, l)
	if err != nil {
		return nil, err
	}
	return renderBytes(ctx, views.LineRow(st.page, v))
}

func (st *liveStream) sendProgress(ctx context.Context) error {
	st.progressAt = time.Now()
	counts, err := st.s.store.ProjectStateCounts(ctx, []int64{st.projectID})
	if err != nil {
		st.logError(ctx, "error counting lines for live progress", err)
		return nil
	}
	html, err := renderBytes(ctx, views.Progress(st.page, counts[st.projectID]))
	if err != nil {
		st.logError(ctx, "error rendering live progress", err)
		return nil
	}
	return st.w.event("progress", html)
}

func (st *liveStream) logError(ctx context.Context, msg string, err error) {
	if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		st.s.logger.ErrorContext(ctx, msg, "project", st.projectID, "err", err)
	}
}

func renderBytes(ctx context.Context, comp templ.Component) ([]byte, error) {
	var buf bytes.Buffer
	if err := comp.Render(ctx, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// StopStreams ends every open event stream. Serve calls it when shutting down, since
// http.Server.Shutdown waits for running handlers and a stream would otherwise run
// until the browser leaves.
func (s *Server) StopStreams() { s.stopStreams() }

// streamMayGoOn says whether an open stream may keep sending line text: its session
// still exists (no logout, no disabling, no password reset), its user's role is the
// one the stream began with, and the user may still see the project (still a member).
// The browser reconnects after a role change, with the rights of the new role.
func (s *Server) streamMayGoOn(ctx context.Context, token string, role studio.Role, projectID int64) bool {
	sess, err := s.store.SessionByToken(ctx, token, s.cfg.SessionTTL)
	if err != nil || sess.User.Role != role {
		return false
	}
	_, err = s.store.ProjectFor(ctx, sess.User, projectID)
	return err == nil
}
