// Package web is dubstudio's HTTP side: the echo server, routes, authentication,
// CSRF protection and the handlers that parse input, call the store and render templ
// views (full pages, or fragments for htmx requests).
package web

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"dubstudio/audio"
	"dubstudio/config"
	"dubstudio/i18n"
	"dubstudio/live"
	"dubstudio/media"
	"dubstudio/static"
	"dubstudio/studio"
	"dubstudio/views"
)

// Header names htmx uses.
const (
	hxRequest  = "HX-Request"
	hxRetarget = "HX-Retarget"
	hxReswap   = "HX-Reswap"
	hxRedirect = "HX-Redirect"
	hxTrigger  = "HX-Trigger"
)

// Deps are what the server needs from the rest of the program.
type Deps struct {
	Config *config.Config
	Store  *studio.Store
	Logger *slog.Logger
	// Renderer queues and cancels renders; nil disables rendering (tests of other parts).
	Renderer Renderer
	// Exporter queues exports; nil disables them.
	Exporter Exporter
	// Proxies queue the proxies of source videos; nil: a source keeps its sound only.
	Proxies Proxies
	// Live delivers line changes to the event streams of open pages; nil: the streams
	// only ping (a live.Listener must publish to it).
	Live *live.Broker
	// Mounts add routes owned by other packages (River UI, metrics, live events),
	// given the group for each role.
	Mounts []func(r Routes)
	// Media stores uploaded audio and cuts and mixes derived audio; nil: a
	// media.Library over Store and DATA_DIR/blobs.
	Media Media
}

// Routes are the route groups by required role, for Mounts.
type Routes struct {
	Public  *echo.Group
	Editor  *echo.Group
	Manager *echo.Group
	Admin   *echo.Group
	// Page renders a full page for a request (layout, user, language).
	Page func(c echo.Context, title, nav string) views.Page
	// Render writes a templ component.
	Render func(c echo.Context, status int, comp templ.Component) error
}

// Server is the web app.
type Server struct {
	renderer Renderer
	exporter Exporter
	proxies  Proxies
	cfg      *config.Config
	store    *studio.Store
	logger   *slog.Logger
	blobs    studio.BlobStore
	media    Media
	echo     *echo.Echo
	live     *live.Broker
	// streams ends when the server shuts down, ending the event streams.
	streams     context.Context
	stopStreams context.CancelFunc
}

// New builds the server and its routes.
func New(d Deps) *Server {
	s := &Server{renderer: d.Renderer, exporter: d.Exporter, proxies: d.Proxies, cfg: d.Config, store: d.Store, logger: d.Logger, blobs: studio.BlobStore{Dir: d.Config.DataDir + "/blobs"}}
	s.media = d.Media
	if s.media == nil {
		lib := media.NewLibrary(d.Store, s.blobs)
		lib.Limits = media.Limits{ReferenceMinMs: d.Config.ReferenceMinMs, ReferenceMaxMs: d.Config.ReferenceMaxMs,
			SourceMaxMs: d.Config.SourceMaxMs, MinFreeBytes: d.Config.MinFreeBytes,
			PeaksCacheEntries: 2 * d.Config.TimelineMaxLines}
		lib.Duck = audio.DuckParams{ThresholdDB: d.Config.BedDuckThresholdDB, Ratio: d.Config.BedDuckRatio,
			AttackMs: d.Config.BedDuckAttackMs, ReleaseMs: d.Config.BedDuckReleaseMs}
		s.media = lib
	}
	s.live = d.Live
	if s.live == nil {
		s.live = live.NewBroker(live.BrokerConfig{})
	}
	s.streams, s.stopStreams = context.WithCancel(context.Background())
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.IPExtractor = clientIP(d.Config.TrustedProxies)
	e.Use(s.recoverPanic, s.securityHeaders, s.limitBody, s.loadSession, s.checkCSRF)
	s.echo = e

	staticFS, _ := fs.Sub(static.FS, ".")
	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static/", cacheStatic(http.FileServer(http.FS(staticFS))))))
	e.GET("/favicon.ico", echo.WrapHandler(cacheStatic(http.FileServer(http.FS(staticFS)))))
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.GET("/metrics", s.metricsHandler()) // METRICS_TOKEN bearer or an admin's session
	e.GET("/", func(c echo.Context) error { return c.Redirect(http.StatusSeeOther, "/projects") })
	e.GET("/login", s.showLogin)
	e.POST("/login", s.login)
	e.POST("/logout", s.logout)

	// projectAccess comes before the manager and admin role checks, so that a project an
	// editor may not see is a 404 on every route, as an unknown one is, not the
	// manager's or admin's 403; an archived project refuses changes after the role check.
	editor := e.Group("", s.requireRole(studio.RoleEditor), s.projectAccess, s.refuseArchived)
	manager := e.Group("", s.requireRole(studio.RoleEditor), s.projectAccess, s.requireRole(studio.RoleManager), s.refuseArchived)
	admin := e.Group("", s.requireRole(studio.RoleEditor), s.projectAccess, s.requireRole(studio.RoleAdmin), s.refuseArchived)
	s.routes(editor, manager, admin)
	r := Routes{Public: e.Group(""), Editor: editor, Manager: manager, Admin: admin, Page: s.page, Render: s.render}
	for _, m := range d.Mounts {
		m(r)
	}
	// A group's middleware comes with a catch-all route of its own, the admin group's
	// last: without this one, an unknown URL would say "forbidden" to everyone else.
	e.RouteNotFound("/*", func(echo.Context) error { return echo.ErrNotFound })
	return s
}

func (s *Server) routes(editor, manager, admin *echo.Group) {
	editor.POST("/me/lang", s.setLang)

	editor.GET("/projects", s.listProjects)
	editor.POST("/projects", s.createProject)
	editor.GET("/projects/:pid", s.showProject)
	editor.GET("/projects/:pid/settings", s.showProjectSettings)
	editor.GET("/projects/:pid/progress", s.showProgress)
	editor.GET("/projects/:pid/events", s.streamEvents)
	editor.POST("/projects/:pid/rename", s.renameProject)
	editor.POST("/projects/:pid/fit", s.saveFitSettings)
	editor.POST("/projects/:pid/glossary", s.addGlossaryEntry)
	editor.POST("/projects/:pid/glossary/:gid/delete", s.deleteGlossaryEntry)
	manager.POST("/projects/:pid/archive", s.archiveProject)
	manager.POST("/projects/:pid/unarchive", s.unarchiveProject)
	manager.POST("/projects/:pid/delete", s.deleteProject)
	manager.POST("/projects/:pid/members", s.addMember)
	manager.POST("/projects/:pid/members/:uid/delete", s.removeMember)
	manager.GET("/dashboard", s.showDashboard)
	manager.GET("/projects/:pid/dashboard", s.showProjectDashboard)
	manager.GET("/projects/:pid/dashboard/throughput", s.showProjectThroughput)

	editor.POST("/projects/:pid/import", s.importScript)
	editor.GET("/projects/:pid/export.srt", s.exportScript)
	editor.GET("/projects/:pid/export.csv", s.exportScript)
	editor.GET("/projects/:pid/export.vtt", s.exportScript)
	editor.GET("/projects/:pid/export.ass", s.exportScript)
	editor.GET("/projects/:pid/export", s.exportScript)

	editor.GET("/projects/:pid/lines", s.listLines)
	editor.POST("/projects/:pid/lines/assign", s.assignLines)
	editor.GET("/projects/:pid/lines/:lid", s.showLine)
	editor.GET("/projects/:pid/lines/:lid/edit", s.editLine)
	editor.POST("/projects/:pid/lines/:lid", s.saveLine)
	editor.GET("/projects/:pid/lines/:lid/history", s.showLineHistory)
	editor.POST("/projects/:pid/lines/:lid/split", s.splitLine)
	editor.POST("/projects/:pid/lines/:lid/merge", s.mergeLine)

	editor.POST("/projects/:pid/render", s.renderPending)
	editor.POST("/projects/:pid/retry-failed", s.retryFailed)
	editor.POST("/projects/:pid/cancel", s.cancelRender)
	editor.POST("/projects/:pid/lines/render", s.renderSelected)
	editor.POST("/projects/:pid/lines/:lid/render", s.renderLine)
	editor.GET("/projects/:pid/lines/:lid/takes", s.showTakes)
	editor.POST("/projects/:pid/takes/:tid/approve", s.approveTake)
	editor.POST("/projects/:pid/takes/:tid/use", s.useTake)
	editor.GET("/projects/:pid/failed", s.showFailed)
	editor.GET("/projects/:pid/review", s.showReview)
	editor.GET("/projects/:pid/lines/:lid/review-status", s.reviewStatus)
	editor.POST("/projects/:pid/review/takes/:tid/approve", s.approveReviewTake)
	editor.POST("/projects/:pid/review/takes/:tid/use", s.useReviewTake)
	editor.POST("/projects/:pid/review/takes/:tid/comments", s.commentTake)
	editor.POST("/projects/:pid/review/lines/:lid/render", s.regenerateReviewLine)
	editor.POST("/projects/:pid/review/lines/:lid/source-emotion", s.setSourceEmotion)
	editor.POST("/projects/:pid/lines/:lid/approve", s.approveCurrentTake)
	editor.POST("/projects/:pid/lines/range", s.playRange)
	editor.POST("/projects/:pid/source", s.uploadSource)
	editor.POST("/projects/:pid/source/delete", s.deleteSource)
	editor.GET("/projects/:pid/lines/:lid/source.wav", s.serveSourceSegment)
	s.videoRoutes(editor)
	s.timelineRoutes(editor)
	s.bedRoutes(editor)
	s.languageRoutes(editor)
	editor.GET("/projects/:pid/exports", s.showExports)
	editor.POST("/projects/:pid/exports", s.startExport)
	editor.GET("/projects/:pid/exports/:eid/download", s.downloadExport)
	admin.POST("/admin/queue/pause", s.pauseQueue)
	admin.POST("/admin/queue/resume", s.resumeQueue)
	admin.GET("/admin/workers", s.listWorkers)

	editor.GET("/projects/:pid/characters", s.listCharacters)
	editor.POST("/projects/:pid/characters", s.createCharacter)
	editor.POST("/projects/:pid/characters/:cid", s.saveCharacter)
	editor.POST("/projects/:pid/characters/:cid/reference", s.uploadReference)
	editor.POST("/projects/:pid/characters/:cid/emotion-audio", s.uploadEmotionAudio)
	editor.POST("/projects/:pid/characters/:cid/delete", s.deleteCharacter)
	editor.GET("/blobs/:sha", s.serveBlob)

	admin.GET("/admin/users", s.listUsers)
	admin.POST("/admin/users", s.createUser)
	admin.POST("/admin/users/:uid/role", s.setUserRole)
	admin.POST("/admin/users/:uid/password", s.resetUserPassword)
	admin.POST("/admin/users/:uid/disabled", s.setUserDisabled)
	admin.POST("/admin/users/:uid/unlock", s.unlockUser)
	s.gpuRoutes(admin)
}

// clientIP is how the server tells the client's address (for the login throttle and
// the logs): the connection's, unless it comes from one of the trusted proxies, whose
// X-Forwarded-For is then read. Echo would trust loopback and private addresses by
// default; here nothing is trusted unless TRUSTED_PROXIES says so.
func clientIP(trusted []*net.IPNet) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range trusted {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// uploadLimit is the size of the body a request may send: for a multipart form to a
// route that takes a file, its upload limit plus room for the form's other fields;
// for every other body, MAX_FORM_KB. upload says which. The content type counts as
// much as the path: a URL-encoded form or JSON is read into memory whole (Go's
// ParseForm drops its own 10 MB cap under http.MaxBytesReader), so the upload limit,
// gigabytes for a source, must never apply to one.
func (s *Server) uploadLimit(path, contentType string) (limit int64, upload bool) {
	const slack = 1 << 20
	if contentType == "multipart/form-data" && strings.HasPrefix(path, "/projects/") {
		switch {
		case strings.HasSuffix(path, "/source"), strings.HasSuffix(path, "/bed"):
			return s.cfg.SourceMaxUploadBytes + slack, true
		case strings.HasSuffix(path, "/reference"), strings.HasSuffix(path, "/emotion-audio"), strings.HasSuffix(path, "/import"):
			return s.cfg.MaxUploadBytes + slack, true
		}
	}
	return s.cfg.MaxFormBytes, false
}

// limitBody bounds every request body before anything reads it: a body announced
// larger than its limit (uploadLimit) is refused with 413 unread, and any other is
// read through http.MaxBytesReader, so that a body without a length stops at the
// limit too. A URL-encoded form is parsed here, where the overflow can still be told
// apart from an empty form (c.FormValue drops the error).
func (s *Server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		badText := echo.NewHTTPError(http.StatusBadRequest, s.t(c, "error.bad_text"))
		if !validText(r.URL.Query()) {
			return badText
		}
		if safeMethod(r.Method) || r.Body == nil || r.Body == http.NoBody {
			return next(c)
		}
		ct, _, _ := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType))
		limit, upload := s.uploadLimit(r.URL.Path, ct)
		tooLarge := echo.NewHTTPError(http.StatusRequestEntityTooLarge, s.t(c, "error.form_too_large", s.cfg.MaxFormBytes>>10))
		if upload {
			tooLarge = echo.NewHTTPError(http.StatusRequestEntityTooLarge, s.t(c, "error.too_large", (limit>>20)-1))
		}
		if r.ContentLength > limit {
			// Close rather than drain what the client still sends.
			c.Response().Header().Set("Connection", "close")
			return tooLarge
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
		var mbe *http.MaxBytesError
		switch {
		case ct == echo.MIMEApplicationForm:
			if err := r.ParseForm(); errors.As(err, &mbe) {
				return tooLarge
			} else if err != nil {
				// Past Go's field limit (10,000 by default) the form would reach the
				// handler empty and be answered as if nothing had been sent; a bad
				// escape would lose its field without a word.
				return echo.NewHTTPError(http.StatusBadRequest, s.t(c, "error.bad_form"))
			}
			if !validText(r.PostForm) {
				return badText
			}
		case ct == "multipart/form-data" && !upload:
			// A form without a file is at most MAX_FORM_KB: parsed here, in memory.
			if err := r.ParseMultipartForm(limit); errors.As(err, &mbe) {
				return tooLarge
			}
			if r.MultipartForm != nil && !validText(r.MultipartForm.Value) {
				return badText
			}
		case ct == echo.MIMEApplicationJSON || strings.HasSuffix(ct, "+json"):
			// No route reads JSON today; one that does gets text that Postgres takes.
			body, err := io.ReadAll(r.Body)
			if errors.As(err, &mbe) {
				return tooLarge
			}
			if err != nil {
				return echo.NewHTTPError(http.StatusBadRequest, s.t(c, "error.bad_request"))
			}
			if !validJSONText(body) {
				return badText
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		return next(c)
	}
}

// validText says whether every value is valid UTF-8 without NUL bytes, which no text
// field accepts (Postgres refuses both: they used to give a 500).
func validText(vs url.Values) bool {
	for k, list := range vs {
		for _, v := range append(list, k) {
			if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
				return false
			}
		}
	}
	return true
}

// validJSONText says whether a JSON body is valid UTF-8 without a NUL byte, raw or
// escaped (\u0000, which a JSON decoder turns into one).
func validJSONText(body []byte) bool {
	if !utf8.Valid(body) || bytes.IndexByte(body, 0) >= 0 {
		return false
	}
	for i := 0; i+6 <= len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		if bytes.EqualFold(body[i:i+6], []byte(`\u0000`)) {
			return false
		}
		i++ // the escaped character: `\\u0000` is a backslash and "u0000"
	}
	return true
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.echo }

// Serve serves on ln (listening on the configured address) until ctx ends, then shuts
// down gracefully. The caller listens, so that it knows the address is taken before it
// tells anyone to open it.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Addr: s.cfg.HTTPAddr, Handler: s.echo, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: nil}
	srv.RegisterOnShutdown(s.StopStreams)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// render writes comp into a buffer first, so that a failing render becomes a clean 500.
func (s *Server) render(c echo.Context, status int, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(c.Request().Context(), &buf); err != nil {
		return err
	}
	return c.HTMLBlob(status, buf.Bytes())
}

func isHTMX(c echo.Context) bool { return c.Request().Header.Get(hxRequest) == "true" }

// wantsFragment says whether a route that answers htmx with a fragment should do so:
// an htmx request that is not htmx restoring a pushed URL from history, which puts
// the answer in place of the whole body and so needs the page.
func wantsFragment(c echo.Context) bool {
	return isHTMX(c) && c.Request().Header.Get(hxHistoryRestore) != "true"
}

func cacheStatic(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// page builds the view data every page needs.
func (s *Server) page(c echo.Context, title, nav string) views.Page {
	p := views.Page{Lang: langOf(c), CSRF: csrfToken(c), Title: title, Nav: nav}
	if u := currentUser(c); u != nil {
		p.User = u
	}
	return p
}

func (s *Server) t(c echo.Context, key string, args ...any) string {
	return i18n.T(langOf(c), key, args...)
}
