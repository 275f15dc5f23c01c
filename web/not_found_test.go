package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
)

// TestUnknownURLsAreNotFoundForEveryRole: a URL that no route serves is a 404 for an
// anonymous visitor, an editor, a manager and an admin alike (an editor once got 403,
// from the manager and admin groups' middleware), whatever the method; a POST with
// the CSRF token is not turned into a 403 either.
func TestUnknownURLsAreNotFoundForEveryRole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clients := map[string]*client{
		"anonymous":                b.anon(t),
		string(studio.RoleEditor):  b.as(t, studio.RoleEditor),
		string(studio.RoleManager): b.as(t, studio.RoleManager),
		string(studio.RoleAdmin):   b.as(t, studio.RoleAdmin),
	}
	paths := []string{"/no-such-page", "/admin/no-such-page", "/users/no/such/page", "/projects/1/no-such-tab"}
	for who, c := range clients {
		for _, path := range paths {
			resp := c.get(path)
			require.Equal(t, http.StatusNotFound, resp.StatusCode, "GET %s as %s", path, who)
			if who != "anonymous" {
				resp = c.post(path, url.Values{}, true)
				require.Equal(t, http.StatusNotFound, resp.StatusCode, "POST %s as %s", path, who)
			}
		}
	}
}
