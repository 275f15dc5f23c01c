package web_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/web"
)

// River's UI is mounted for admins only; its API accepts unsafe requests only from
// pages of this site.
func TestRiverUIIsForAdmins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client, err := river.NewClient(riverpgxv5.New(b.store.Pool()), &river.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	mount, err := web.MountRiverUI(ctx, client, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	srv := web.New(web.Deps{Config: b.cfg, Store: b.store, Logger: slog.New(slog.DiscardHandler), Mounts: []func(web.Routes){mount}})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	b.server = ts

	require.Equal(t, http.StatusSeeOther, b.anon(t).get("/admin/jobs").StatusCode)
	require.Equal(t, http.StatusForbidden, b.as(t, studio.RoleManager).get("/admin/jobs").StatusCode)
	admin := b.as(t, studio.RoleAdmin)
	resp := admin.get("/admin/jobs/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// River's page has a way back to the app.
	back := doc(t, resp).Find(`[data-testid=back-to-app]`)
	href, _ := back.Attr("href")
	require.Equal(t, "/", href)
	require.Contains(t, back.Text(), "Back to dubstudio")
	resp = admin.get("/admin/jobs/api/jobs?state=available&limit=5")
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// A cross-site POST to its API is refused; the same from a page of this site passes
	// the CSRF check (and reaches River's handler).
	cross := admin.do("POST", "/admin/jobs/api/jobs/cancel", strings.NewReader(`{"ids":["1"]}`), "application/json",
		map[string]string{"Sec-Fetch-Site": "cross-site"})
	require.Equal(t, http.StatusForbidden, cross.StatusCode)
	same := admin.do("POST", "/admin/jobs/api/jobs/cancel", strings.NewReader(`{"ids":["1"]}`), "application/json",
		map[string]string{"Sec-Fetch-Site": "same-origin"})
	require.NotEqual(t, http.StatusForbidden, same.StatusCode)
}
