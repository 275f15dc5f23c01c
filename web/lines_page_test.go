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
	"dubstudio/studio/studiotest"
)

// TestLinesHistoryRestoreIsAWholePage: the filter and the pager push /projects/N/lines
// URLs; going back or forward to one that htmx has not cached (its history cache is
// full, or the page was too large for it) makes htmx ask for the URL with
// HX-Request and HX-History-Restore-Request and put the answer in place of the whole
// body. That answer must be the page, layout and all, not the table alone, which
// left the editor on a bare table without navigation, filters or render bar.
func TestLinesHistoryRestoreIsAWholePage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.as(t, studio.RoleEditor)
	path := fmt.Sprintf("/projects/%d/lines?state=draft&page=1", b.project.ID)

	// A swap by the filter: the table alone.
	resp := c.do("GET", path, nil, "", map[string]string{"HX-Request": "true"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	d := doc(t, resp)
	require.Equal(t, 1, d.Find(`[data-testid=lines]`).Length())
	require.Zero(t, d.Find(`[data-testid=filters]`).Length())

	// A history restore: the page.
	resp = c.do("GET", path, nil, "", map[string]string{"HX-Request": "true", "HX-History-Restore-Request": "true"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	d = doc(t, resp)
	require.Equal(t, 1, d.Find(`[data-testid=project-name]`).Length(), "the page's head")
	require.Equal(t, 1, d.Find(`[data-testid=filters]`).Length(), "the filters")
	require.Equal(t, 1, d.Find(`[data-testid=render-bar]`).Length(), "the render bar")
	require.Equal(t, 3, d.Find(`[data-testid=line-row]`).Length())
	sel, _ := d.Find(`[data-testid=filters] select[name=state] option[selected]`).Attr("value")
	require.Equal(t, "draft", sel, "the filter of the URL")
}

// TestBulkActionOnTheLastPageStaysOnAPage: an editor filters the lines without a
// character, goes to the last page, ticks its lines and assigns them: they leave the
// filter, so that page no longer exists. The table that comes back shows the last
// page there is (with its lines and a pager that counts right), not an empty
// "page 3 of 2".
func TestBulkActionOnTheLastPageStaysOnAPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ed := b.users[studio.RoleEditor]
	p := studiotest.Project(t, b.store, ed, 250) // 3 pages of 100
	studiotest.Exec(t, b.store, `UPDATE lines SET character_id = NULL WHERE project_id = $1`, p.ID)
	chars, err := b.store.Characters(ctx, p.ID)
	require.NoError(t, err)
	c := b.as(t, studio.RoleEditor)

	last, err := b.store.Lines(ctx, p.ID, studio.LineFilter{CharacterID: -1, Page: 3})
	require.NoError(t, err)
	require.Len(t, last.Lines, 50)
	form := url.Values{"character_id": {fmt.Sprint(chars[0].ID)}, "character": {"-1"}, "page": {"3"}}
	for _, l := range last.Lines {
		form.Add("line_id", fmt.Sprint(l.ID))
	}
	resp := c.htmx("POST", fmt.Sprintf("/projects/%d/lines/assign", p.ID), form)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	d := doc(t, resp)
	require.Contains(t, d.Find(`[data-testid=notice]`).Text(), "50")
	require.Equal(t, 100, d.Find(`[data-testid=line-row]`).Length(), "the last page there is now: page 2")
	pager := strings.Join(strings.Fields(d.Find(`[data-testid=pager]`).Text()), " ")
	require.Contains(t, pager, "Page 2 of 2 (200 lines)", pager)
	page, _ := d.Find(`#bulk input[name=page]`).Attr("value")
	require.Equal(t, "2", page, "the next action keeps to that page")

	// A page past the end typed into the URL is the last page too.
	d = doc(t, c.get(fmt.Sprintf("/projects/%d/lines?character=-1&page=99", p.ID)))
	require.Equal(t, 100, d.Find(`[data-testid=line-row]`).Length())
}
