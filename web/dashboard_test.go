package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// setupDashboard gives the bundle's project three one-minute lines: the first done
// with a take a minute ago, the second failed, the third still a draft; and an
// archived project that the overview leaves out.
func setupDashboard(t *testing.T) (*testBundle, []studio.Line) {
	t.Helper()
	b := setup(t)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := b.store.Pool().Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	exec("UPDATE lines SET end_ms = start_ms + 60000 WHERE project_id = $1", b.project.ID)
	lines, err := b.store.AllLines(ctx, b.project.ID)
	require.NoError(t, err)
	exec("UPDATE lines SET state = 'done' WHERE id = $1", lines[0].ID)
	exec(`UPDATE lines SET state = 'failed', attempts = 3, last_error = 'model host crashed <twice>' WHERE id = $1`, lines[1].ID)
	sha := strings.Repeat("b", 64)
	exec(`INSERT INTO blobs (sha256, size_bytes, format, duration_ms, sample_rate, channels) VALUES ($1, 1, 'wav', 60000, 48000, 1)`, sha)
	exec(`INSERT INTO takes (line_id, project_id, revision, render_seq, engine, spoken_text, audio_sha256, duration_ms, created_at)
		VALUES ($1, $2, 1, 1, 'sim', 'x', $3, 60000, now() - interval '1 minute')`, lines[0].ID, b.project.ID, sha)

	archived, err := b.store.CreateProject(ctx, "Old show", nil)
	require.NoError(t, err)
	require.NoError(t, b.store.SetProjectArchived(ctx, archived.ID, true))
	return b, lines
}

func TestDashboardIsForManagers(t *testing.T) {
	t.Parallel()
	b, _ := setupDashboard(t)
	p := fmt.Sprintf("/projects/%d/dashboard", b.project.ID)
	for _, path := range []string{"/dashboard", p, p + "/throughput"} {
		require.Equal(t, http.StatusForbidden, b.as(t, studio.RoleEditor).get(path).StatusCode, path)
		require.Equal(t, http.StatusSeeOther, b.anon(t).get(path).StatusCode, path)
		require.Equal(t, http.StatusOK, b.as(t, studio.RoleManager).get(path).StatusCode, path)
		require.Equal(t, http.StatusOK, b.as(t, studio.RoleAdmin).get(path).StatusCode, path)
	}
	require.Equal(t, http.StatusNotFound, b.as(t, studio.RoleManager).get("/projects/999999/dashboard").StatusCode)

	// The editor's page links to the dashboard for managers only.
	editorPage := doc(t, b.as(t, studio.RoleEditor).get(fmt.Sprintf("/projects/%d", b.project.ID)))
	require.Zero(t, editorPage.Find(`[data-testid=project-dashboard-link]`).Length())
	managerPage := doc(t, b.as(t, studio.RoleManager).get(fmt.Sprintf("/projects/%d", b.project.ID)))
	href, _ := managerPage.Find(`[data-testid=project-dashboard-link]`).Attr("href")
	require.Equal(t, p, href)
}

func TestDashboardOverview(t *testing.T) {
	t.Parallel()
	b, lines := setupDashboard(t)
	c := b.as(t, studio.RoleManager)
	d := doc(t, c.get("/dashboard"))
	rows := d.Find(`[data-testid=dashboard-row]`)
	require.Equal(t, 1, rows.Length(), "active projects only")
	row := rows.First()
	text := func(testid string) string { return strings.TrimSpace(row.Find(`[data-testid=` + testid + `]`).Text()) }
	require.Equal(t, b.project.Name, text("dashboard-project"))
	require.Contains(t, text("audio-done"), "1.0 of 3.0 min")
	require.Contains(t, text("audio-done"), "33%")
	require.Equal(t, "0.1", text("lines-per-min"), "one take in 15 minutes")
	require.Equal(t, "4.0", text("audio-per-hour"), "a minute of audio per quarter hour")
	require.Equal(t, "Nothing queued", text("eta"), "two minutes left, but none of it queued: no time to go")
	require.True(t, strings.HasPrefix(text("approved"), "0 of 3 lines"), text("approved"))
	require.Equal(t, "1", text("failed"))
	require.Equal(t, 1, row.Find(`[data-testid=progress] .seg.st-failed`).Length())
	poll, _ := d.Find(`[data-testid=dashboard]`).Attr("hx-trigger")
	require.Contains(t, poll, "every")

	// The periodic reload gets the numbers only.
	resp := c.htmx("GET", "/dashboard", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	frag := doc(t, resp)
	require.Zero(t, frag.Find(`header.topbar`).Length())
	require.Equal(t, 1, frag.Find(`[data-testid=dashboard-row]`).Length())

	// In Chinese.
	require.NoError(t, b.store.SetUserLang(context.Background(), b.users[studio.RoleManager].ID, "zh"))
	zh := doc(t, c.get("/dashboard"))
	require.Contains(t, zh.Find("h1").Text(), "看板")
	require.Contains(t, zh.Find(`[data-testid=eta]`).Text(), "没有排队的台词")

	// With the draft queued, its minute at that rate: a quarter of an hour (the failed
	// line's minute is not counted: nothing renders it until it is queued again). With
	// the done line's take approved and commented on, the counts say so.
	require.NoError(t, b.store.SetUserLang(context.Background(), b.users[studio.RoleManager].ID, "en"))
	studiotest.Exec(t, b.store, `UPDATE lines SET state = 'queued' WHERE id = $1`, lines[2].ID)
	studiotest.Exec(t, b.store, `UPDATE lines SET approved_take_id = (SELECT id FROM takes WHERE line_id = $1) WHERE id = $1`, lines[0].ID)
	studiotest.Exec(t, b.store, `INSERT INTO take_reviews (project_id, line_id, action) VALUES ($1, $2, 'regenerate')`, b.project.ID, lines[0].ID)
	row = doc(t, c.get("/dashboard")).Find(`[data-testid=dashboard-row]`).First()
	require.Equal(t, "15 min", text("eta"), "the queued minute at a minute per quarter hour")
	require.True(t, strings.HasPrefix(text("approved"), "1 of 3 lines"), text("approved"))
	require.Equal(t, "1 reviewed", text("reviewed"))
}

func TestProjectDashboard(t *testing.T) {
	t.Parallel()
	b, lines := setupDashboard(t)
	c := b.as(t, studio.RoleManager)
	path := fmt.Sprintf("/projects/%d/dashboard", b.project.ID)
	d := doc(t, c.get(path))

	tile := func(testid string) string {
		return strings.TrimSpace(d.Find(`[data-testid=` + testid + `] .tile-value`).Text())
	}
	require.Equal(t, "33%", tile("tile-audio"))
	require.Equal(t, "0.1", tile("tile-lines-per-min"))
	require.Equal(t, "4.0", tile("tile-audio-per-hour"))
	require.Equal(t, "Nothing queued", tile("tile-eta"))
	require.Equal(t, "0.0 min queued of 2.0 min to go", strings.TrimSpace(d.Find(`[data-testid=eta-audio]`).Text()))
	require.Equal(t, "0", tile("tile-approved"))
	require.Contains(t, d.Find(`[data-testid=tile-approved]`).Text(), "of 3 lines · 0 reviewed · 0 need review")
	require.Equal(t, "1", tile("tile-failed"))

	counts := map[string]string{}
	d.Find(`[data-testid=by-state] tr`).Each(func(_ int, s *goquery.Selection) {
		st, _ := s.Attr("data-state")
		counts[st] = strings.TrimSpace(s.Find(`[data-testid=state-count]`).Text())
	})
	require.Equal(t, "1", counts["done"])
	require.Equal(t, "1", counts["failed"])
	require.Equal(t, "1", counts["draft"])
	require.Equal(t, "0", counts["queued"])

	chars := d.Find(`[data-testid=character-row]`)
	require.Equal(t, 2, chars.Length())
	require.Equal(t, "Alice", strings.TrimSpace(chars.Eq(0).Find(`[data-testid=character-name]`).Text()))
	require.Equal(t, "2", strings.TrimSpace(chars.Eq(0).Find(`[data-testid=character-lines]`).Text()))
	require.Equal(t, "Bob", strings.TrimSpace(chars.Eq(1).Find(`[data-testid=character-name]`).Text()))
	require.Equal(t, "1", strings.TrimSpace(chars.Eq(1).Find(`[data-testid=character-failed]`).Text()))
	require.Equal(t, 1, chars.Eq(0).Find(`[data-testid=progress] .seg.st-done`).Length(), "stacked bar per character")

	failures := d.Find(`[data-testid=failure]`)
	require.Equal(t, 1, failures.Length())
	require.Equal(t, "model host crashed <twice>", strings.TrimSpace(failures.Find(`[data-testid=failure-error]`).Text()))
	require.Equal(t, "3", strings.TrimSpace(failures.Find(`[data-testid=failure-attempts]`).Text()))
	href, _ := failures.Find(`[data-testid=failure-link]`).Attr("href")
	require.Equal(t, fmt.Sprintf("/projects/%d/lines?state=failed#line-%d", b.project.ID, lines[1].ID), href)

	src, _ := d.Find(`[data-testid=throughput-chart]`).Attr("data-uplot-src")
	require.Equal(t, path+"/throughput", src)
	require.Equal(t, 1, d.Find(`script[src="/static/vendor/uplot.min.js"]`).Length())
	connect, _ := d.Find(`[data-testid=live]`).Attr("sse-connect")
	require.Equal(t, fmt.Sprintf("/projects/%d/events?rows=0", b.project.ID), connect)

	// A reload: the summary, and the details out of band.
	frag := doc(t, c.htmx("GET", path, nil))
	require.Zero(t, frag.Find(`header.topbar`).Length())
	require.Equal(t, "Nothing queued", strings.TrimSpace(frag.Find(`[data-testid=tile-eta] .tile-value`).Text()))
	oob, _ := frag.Find(`#dash-details`).Attr("hx-swap-oob")
	require.Equal(t, "true", oob)
	require.Equal(t, 1, frag.Find(`#dash-details [data-testid=failure]`).Length())
}

func TestProjectThroughputJSON(t *testing.T) {
	t.Parallel()
	b, _ := setupDashboard(t)
	resp := b.as(t, studio.RoleManager).get(fmt.Sprintf("/projects/%d/dashboard/throughput", b.project.ID))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "application/json")
	var series struct {
		T      []int64   `json:"t"`
		AudioS []float64 `json:"audio_s"`
		Lines  []int     `json:"lines"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&series))
	require.Len(t, series.T, 60)
	require.Len(t, series.AudioS, 60)
	require.Len(t, series.Lines, 60)
	total, takes := 0.0, 0
	for i := range series.T {
		if i > 0 {
			require.Equal(t, int64(60), series.T[i]-series.T[i-1], "one point a minute")
		}
		total += series.AudioS[i]
		takes += series.Lines[i]
	}
	require.InDelta(t, 60.0, total, 1e-9)
	require.Equal(t, 1, takes)
}
