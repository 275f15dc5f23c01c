package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
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
