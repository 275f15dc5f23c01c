package web

import (
	"bytes"
	"context"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"
	"riverqueue.com/riverui"

	"dubstudio/i18n"
)

// riverUIPrefix is where River's own UI is mounted, for admins only.
const riverUIPrefix = "/admin/jobs"

// MountRiverUI serves River's UI (jobs, queues, retries) under /admin/jobs to admins.
// It is started with ctx and stops with it.
func MountRiverUI(ctx context.Context, client *river.Client[pgx.Tx], logger *slog.Logger) (func(Routes), error) {
	h, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(client, nil),
		Logger:    logger,
		Prefix:    riverUIPrefix,
	})
	if err != nil {
		return nil, err
	}
	if err := h.Start(ctx); err != nil {
		return nil, err
	}
	return func(r Routes) {
		r.Admin.Any(riverUIPrefix, withBackLink(h))
		r.Admin.Any(riverUIPrefix+"/*", withBackLink(h))
	}, nil
}

// withBackLink serves River's UI with a link back to dubstudio added to its pages
// (River's own page has none, and it is a page of its own, outside our layout). Its
// API and assets pass through untouched.
func withBackLink(h http.Handler) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method != http.MethodGet || strings.HasPrefix(r.URL.Path, riverUIPrefix+"/api/") {
			h.ServeHTTP(c.Response(), r)
			return nil
		}
		rec := &htmlRecorder{header: http.Header{}, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		body := rec.body.Bytes()
		if strings.HasPrefix(rec.header.Get("Content-Type"), "text/html") && rec.header.Get("Content-Encoding") == "" {
			link := `<a href="/" data-testid="back-to-app" style="position:fixed;right:12px;bottom:12px;z-index:1000;` +
				`padding:6px 12px;border-radius:6px;background:#1d2433;color:#fff;font:13px system-ui,sans-serif;text-decoration:none">` +
				html.EscapeString(i18n.T(langOf(c), "nav.back_to_app")) + `</a>`
			if i := bytes.LastIndex(body, []byte("</body>")); i >= 0 {
				body = append(body[:i:i], append([]byte(link), body[i:]...)...)
				rec.header.Set("Content-Length", strconv.Itoa(len(body)))
			}
		}
		for k, v := range rec.header {
			c.Response().Header()[k] = v
		}
		c.Response().WriteHeader(rec.status)
		_, err := c.Response().Write(body)
		return err
	}
}

// htmlRecorder keeps a response to rewrite it.
type htmlRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *htmlRecorder) Header() http.Header         { return r.header }
func (r *htmlRecorder) WriteHeader(status int)      { r.status = status }
func (r *htmlRecorder) Write(b []byte) (int, error) { return r.body.Write(b) }

// sameOrigin reports whether a request comes from a page of this site, by the
// browser's Sec-Fetch-Site or Origin header. River's UI cannot send our CSRF token, so
// its API calls are accepted on this check instead (they still need an admin session).
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return false
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}
