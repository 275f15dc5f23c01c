package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// TestFailedPageCountsEveryFailure: when an engine is misconfigured every line of a
// long script fails. The failed lines' page lists the first 500 of them; its retry
// button (which retries them all) and a notice say how many there are, rather than
// "Retry 500 failed" for 520 and no word of the 20 left out.
func TestFailedPageCountsEveryFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := studiotest.Project(t, b.store, b.users[studio.RoleEditor], 520)
	studiotest.Exec(t, b.store, `UPDATE lines SET state = 'failed', last_error = 'engine unreachable', attempts = 3 WHERE project_id = $1`, p.ID)
	c := b.as(t, studio.RoleEditor)

	resp := c.get(fmt.Sprintf("/projects/%d/failed", p.ID))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	d := doc(t, resp)
	require.Equal(t, 500, d.Find(`[data-testid=failed-row]`).Length())
	require.Equal(t, "Retry 520 failed", strings.TrimSpace(d.Find(`[data-testid=retry-all]`).Text()))
	require.Equal(t, "The list shows the first 500 failed lines; 20 more are not listed. Retrying retries them all.",
		strings.TrimSpace(d.Find(`[data-testid=failed-omitted]`).Text()))

	// A short list has no notice.
	studiotest.Exec(t, b.store, `UPDATE lines SET state = 'draft' WHERE project_id = $1 AND idx > 3`, p.ID)
	d = doc(t, c.get(fmt.Sprintf("/projects/%d/failed", p.ID)))
	require.Equal(t, 3, d.Find(`[data-testid=failed-row]`).Length())
	require.Equal(t, "Retry 3 failed", strings.TrimSpace(d.Find(`[data-testid=retry-all]`).Text()))
	require.Zero(t, d.Find(`[data-testid=failed-omitted]`).Length())
}
