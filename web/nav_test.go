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
