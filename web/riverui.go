package web

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"
	"riverqueue.com/riverui"
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
		r.Admin.Any(riverUIPrefix, echo.WrapHandler(h))
		r.Admin.Any(riverUIPrefix+"/*", echo.WrapHandler(h))
	}, nil
}

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
