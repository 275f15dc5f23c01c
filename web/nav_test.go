package web_test

import (
	"net/http"
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
