package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
)

// TestNavigationReachesEveryAdminPage: an admin finds the Workers page in the
// navigation (marked as the current page there, not as the GPUs page), and an editor
// does not see it.
func TestNavigationReachesEveryAdminPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp := b.as(t, studio.RoleAdmin).get("/admin/workers")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	d := doc(t, resp)
	for _, href := range []string{"/projects", "/dashboard", "/admin/gpus", "/admin/workers", "/admin/jobs", "/admin/users"} {
		require.Equal(t, 1, d.Find(`nav a[href="`+href+`"]`).Length(), href)
	}
	require.Equal(t, "/admin/workers", d.Find(`nav a.active`).AttrOr("href", ""))

	editor := doc(t, b.as(t, studio.RoleEditor).get("/projects"))
	require.Zero(t, editor.Find(`nav a[href="/admin/workers"]`).Length())
}

// TestWrongDeleteConfirmationReturnsToSettings: a delete whose confirmation does not
// match the project's name changes nothing and lands on the settings page again with
// the reason, not on /projects/N/delete.
func TestWrongDeleteConfirmationReturnsToSettings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	manager := b.as(t, studio.RoleManager)
	p := fmt.Sprintf("/projects/%d", b.project.ID)
	resp := manager.post(p+"/delete", url.Values{"confirm": {"not the name"}}, true)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, p+"/settings?delete=wrong", resp.Header.Get("Location"))
	d := doc(t, manager.get(resp.Header.Get("Location")))
	require.Contains(t, d.Find(`[data-testid=delete-form]`).Text(), "The name does not match; nothing was deleted.")
	_, err := b.store.Project(context.Background(), b.project.ID)
	require.NoError(t, err, "the project is still there")
}

// TestScriptImportHasItsOwnLimit: a script file past MAX_SCRIPT_MB is refused with the
// limit said and nothing imported (the limit is a setting, here 1 MiB).
func TestScriptImportHasItsOwnLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.MaxScriptBytes = 1 << 20
	c := b.as(t, studio.RoleEditor)
	before := b.allLines(t)
	cue := "1\n00:00:01,000 --> 00:00:02,000\nA line of a script.\n\n"
	script := []byte(strings.Repeat(cue, (1<<20)/len(cue)+10))
	body, ct := multipartBody(t, "file", "long.srt", script)
	resp := c.do("POST", fmt.Sprintf("/projects/%d/import", b.project.ID), body, ct,
		map[string]string{"HX-Request": "true", "X-CSRF-Token": c.csrf})
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Contains(t, readAll(t, resp), "the limit is 1 MB")
	require.Equal(t, before, b.allLines(t), "nothing imported")
}

// TestWorkersPageShowsTheBlobCollector: before any run the page says so; after one,
// it shows what was removed and kept and when the next run is due, in English and
// in Chinese.
func TestWorkersPageShowsTheBlobCollector(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.as(t, studio.RoleAdmin)
	d := doc(t, admin.get("/admin/workers"))
	require.Equal(t, 1, d.Find(`[data-testid="blob-gc-never"]`).Length())

	_, err := b.store.Pool().Exec(context.Background(), `INSERT INTO blob_gc_runs (started_at, finished_at, interval_ms,
		grace_ms, removed_blobs, removed_bytes, kept_blobs, kept_bytes)
		VALUES ('2026-05-01 10:00:00+00', '2026-05-01 10:00:02+00', 21600000, 86400000, 3, 4500000, 12, 98000000)`)
	require.NoError(t, err)
	d = doc(t, admin.get("/admin/workers"))
	require.Equal(t, "3 files, 4.5 MB", strings.TrimSpace(d.Find(`[data-testid="blob-gc-removed"]`).Text()))
	require.Equal(t, "12 files, 98.0 MB", strings.TrimSpace(d.Find(`[data-testid="blob-gc-kept"]`).Text()))
	require.Contains(t, d.Find(`[data-testid="blob-gc-last"]`).Text(), "2026-05-01")
	require.Contains(t, d.Find(`[data-testid="blob-gc-next"]`).Text(), "2026-05-01")
	require.Contains(t, d.Find(`[data-testid="blob-gc"]`).Text(), "24h0m0s")

	zh := doc(t, admin.do("GET", "/admin/workers", nil, "", map[string]string{"Accept-Language": "zh-CN"}))
	require.Equal(t, "3 个文件，4.5 MB", strings.TrimSpace(zh.Find(`[data-testid="blob-gc-removed"]`).Text()))
	require.Contains(t, zh.Find(`[data-testid="blob-gc"]`).Text(), "下次运行")
}
