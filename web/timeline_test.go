package web_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/web"
	"dubstudio/workflow"
)

// setupQueueing is setup with the pipeline queueing renders and exports (no worker
// runs them, so what is queued stays queued for the test to see).
func setupQueueing(t *testing.T) *testBundle {
	t.Helper()
	b := setup(t)
	logger := slog.New(slog.DiscardHandler)
	p, err := workflow.NewPipeline(b.store, logger)
	require.NoError(t, err)
	srv := web.New(web.Deps{Config: b.cfg, Store: b.store, Logger: logger, Renderer: p, Exporter: p})
	b.server = httptest.NewServer(srv.Handler())
	t.Cleanup(b.server.Close)
	return b
}

func TestTimelineDrawsATrackPerCharacterWithTheTakesPeaks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ls := b.allLines(t)
	takeWith(t, b, ls[1], 48000, 24000, 440) // Bob's line: half a second of silence, then a tone
	c := b.as(t, studio.RoleEditor)
	d := doc(t, c.get(fmt.Sprintf("/projects/%d/timeline", b.project.ID)))

	tracks := d.Find(`[data-testid=timeline-track]`)
	require.Equal(t, 2, tracks.Length(), "Alice and Bob")
	require.Equal(t, 2, tracks.Eq(0).Find(`[data-clip]`).Length(), "Alice has lines 1 and 3")
	require.Equal(t, 1, tracks.Eq(1).Find(`[data-clip]`).Length(), "Bob has line 2")
	bob := tracks.Eq(1).Find(`[data-clip]`)
	require.Equal(t, strconv.Itoa(ls[1].StartMs), bob.AttrOr("data-start", ""))
	require.Equal(t, strconv.Itoa(ls[1].EndMs), bob.AttrOr("data-end", ""))
	require.Equal(t, "1000", bob.AttrOr("data-take-ms", ""))
	peaks := bob.AttrOr("data-peaks", "")
	require.NotEmpty(t, peaks, "the take's waveform")
	require.Empty(t, tracks.Eq(0).Find(`[data-clip]`).First().AttrOr("data-peaks", "x"), "a line without a take has no waveform")
	require.Equal(t, "5500", d.Find(`[data-timeline]`).AttrOr("data-duration-ms", ""), "no picture: up to the last line's end")
	require.Equal(t, "40", d.Find(`[data-timeline]`).AttrOr("data-frame-ms", ""), "no picture: a nudge is a frame at 25 fps")

	// The editor's page loads the picture and the timeline.
	page := doc(t, c.get(fmt.Sprintf("/projects/%d", b.project.ID)))
	require.Equal(t, 1, page.Find(fmt.Sprintf(`#picture[hx-get="/projects/%d/video"]`, b.project.ID)).Length())
	require.Equal(t, 1, page.Find(fmt.Sprintf(`#timeline[hx-get="/projects/%d/timeline"]`, b.project.ID)).Length())
}

func TestTimelineDrawsAtMostTimelineMaxLines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.TimelineMaxLines = 2
	srv := web.New(web.Deps{Config: b.cfg, Store: b.store, Logger: slog.New(slog.DiscardHandler)})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	b.server = ts
	d := doc(t, b.as(t, studio.RoleEditor).get(fmt.Sprintf("/projects/%d/timeline", b.project.ID)))
	require.Equal(t, 2, d.Find(`[data-clip]`).Length())
	require.Contains(t, d.Find(`[data-testid=timeline-omitted]`).Text(), "first 2 lines; 1 more")
}

// slotForm is a slot change as the timeline sends it.
func slotForm(rev, start, end string) url.Values {
	return url.Values{"base_revision": {rev}, "start_ms": {start}, "end_ms": {end}}
}

func TestSlotChangeIsAnEditThatRequeuesTheLine(t *testing.T) {
	t.Parallel()
	b := setupQueueing(t)
	ctx := context.Background()
	l := b.allLines(t)[1]
	takeWith(t, b, l, 48000, 0, 440)
	l = *mustLine(t, b, l.ID)
	require.Equal(t, studio.StateDone, l.State)
	c := b.as(t, studio.RoleEditor)
	path := fmt.Sprintf("/projects/%d/lines/%d/slot", b.project.ID, l.ID)

	resp := c.htmx("POST", path, slotForm(strconv.Itoa(l.Revision), "2040", "3620"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	d := doc(t, resp)
	clip := d.Find(fmt.Sprintf(`#clip-%d`, l.ID))
	require.Equal(t, "2040", clip.AttrOr("data-start", ""), "the answer is the clip as saved")
	require.Equal(t, strconv.Itoa(l.Revision+1), clip.AttrOr("data-revision", ""))
	require.Contains(t, d.Find(`#timeline-notice[hx-swap-oob]`).Text(), "Line 2 now 00:00:02.040 – 00:00:03.620")

	saved := mustLine(t, b, l.ID)
	require.Equal(t, []int{2040, 3620, l.Revision + 1}, []int{saved.StartMs, saved.EndMs, saved.Revision})
	require.Equal(t, studio.StateQueued, saved.State, "a rendered line is queued again for its new slot")
	require.Equal(t, l.RenderSeq+1, saved.RenderSeq)
	require.NotNil(t, saved.JobID)
	var jobs int
	require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'synthesize_line' AND args->>'line_id' = $1`,
		strconv.FormatInt(l.ID, 10)).Scan(&jobs))
	require.Equal(t, 1, jobs, "one render job")
	hist, err := b.store.LineHistory(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, "edit", hist[0].Action, "kept in the line's history as an edit")
	require.Equal(t, 2000, hist[0].Before.StartMs)
	require.Equal(t, 2040, hist[0].After.StartMs)

	// The same base revision again is stale: 409 with the conflict message, the clip
	// as it now is, nothing changed.
	resp = c.htmx("POST", path, slotForm(strconv.Itoa(l.Revision), "0", "1000"))
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	d = doc(t, resp)
	require.Contains(t, d.Find(`#timeline-notice`).Text(), "changed this line in the meantime")
	require.Equal(t, "2040", d.Find(fmt.Sprintf(`#clip-%d`, l.ID)).AttrOr("data-start", ""))
	require.Equal(t, *saved, *mustLine(t, b, l.ID))

	// A draft line (never rendered) moves and stays a draft: nothing to re-render.
	draft := b.allLines(t)[0]
	resp = c.htmx("POST", fmt.Sprintf("/projects/%d/lines/%d/slot", b.project.ID, draft.ID), slotForm(strconv.Itoa(draft.Revision), "40", "1540"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	moved := mustLine(t, b, draft.ID)
	require.Equal(t, []int{40, 1540}, []int{moved.StartMs, moved.EndMs})
	require.Equal(t, studio.StateDraft, moved.State)
	require.Nil(t, moved.JobID)
}

// TestSlotMoveKeepsATakeThatStillFits: a rendered line dragged along the timeline
// with its length kept is not rendered again while its take fits before the next
// line; the notice says the take is kept. Dragged to where the take would run into
// the next line, its take is fitted again from its raw audio (a fit job, no
// synthesis), or, where no raw audio was kept, it is rendered again.
func TestSlotMoveKeepsATakeThatStillFits(t *testing.T) {
	t.Parallel()
	b := setupQueueing(t)
	ctx := context.Background()
	lines := b.allLines(t)
	l := lines[1]                            // 2000–3500 ms, the next line at 4000
	tk := takeWith(t, b, l, 1700*48, 0, 440) // runs 200 ms past its slot
	studiotest.Exec(t, b.store, `UPDATE takes SET raw_sha256 = audio_sha256 WHERE id = $1`, tk.ID)
	l = *mustLine(t, b, l.ID)
	c := b.as(t, studio.RoleEditor)
	path := fmt.Sprintf("/projects/%d/lines/%d/slot", b.project.ID, l.ID)
	jobs := func(kind string, id int64) int {
		t.Helper()
		var n int
		require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'line_id' = $2`,
			kind, strconv.FormatInt(id, 10)).Scan(&n))
		return n
	}

	resp := c.htmx("POST", path, slotForm(strconv.Itoa(l.Revision), "2240", "3740"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, doc(t, resp).Find(`#timeline-notice[hx-swap-oob]`).Text(), "Line 2 now 00:00:02.240 – 00:00:03.740; its take is kept")
	saved := mustLine(t, b, l.ID)
	require.Equal(t, studio.StateDone, saved.State)
	require.Equal(t, *l.CurrentTakeID, *saved.CurrentTakeID)
	require.Equal(t, l.RenderSeq, saved.RenderSeq, "not rendered again")
	require.Zero(t, jobs("synthesize_line", l.ID))

	// 2400–3900: 100 ms before the next line, where the take needs 200.
	resp = c.htmx("POST", path, slotForm(strconv.Itoa(saved.Revision), "2400", "3900"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	notice := doc(t, resp).Find(`#timeline-notice[hx-swap-oob]`).Text()
	require.Contains(t, notice, "its take ran into the next line, so the same performance is being fitted to the shorter gap")
	saved = mustLine(t, b, l.ID)
	require.Equal(t, studio.StateFitting, saved.State, "fitted again for its new place")
	require.Equal(t, l.RenderSeq+1, saved.RenderSeq)
	require.Equal(t, 1, jobs("fit_line", l.ID))
	require.Zero(t, jobs("synthesize_line", l.ID), "no synthesis")
	// The fit job's take, as workflow's fit worker records it, says so in the takes.
	refit := &studio.Take{LineID: l.ID, ProjectID: l.ProjectID, Revision: tk.Revision, RenderSeq: saved.RenderSeq, Engine: "test",
		SpokenText: l.Text, DurationMs: 1600, StretchRatio: 1.06, BorrowedMs: 100, AudioSHA256: tk.AudioSHA256,
		RawSHA256: &tk.AudioSHA256, RefitOf: &tk.ID}
	ok, err := b.store.FinishRender(ctx, refit)
	require.NoError(t, err)
	require.True(t, ok)
	d := doc(t, c.get(fmt.Sprintf("/projects/%d/lines/%d/takes", b.project.ID, l.ID)))
	require.Equal(t, 2, d.Find(`[data-testid=take-row]`).Length())
	require.Equal(t, 1, d.Find(`[data-testid=take-refit]`).Length(), "the new take only")
	require.Contains(t, d.Find(`[data-testid=take-refit]`).Text(), "no new synthesis")
	d = doc(t, c.get(fmt.Sprintf("/projects/%d/review?line=%d", b.project.ID, l.ID)))
	require.Equal(t, "Fitted again from take 1", strings.TrimSpace(d.Find(`#take-`+strconv.FormatInt(refit.ID, 10)+` [data-testid=review-refit]`).Text()),
		"the review names the take it came from")
	require.Equal(t, 1, d.Find(`[data-testid=review-refit]`).Length())

	// A take without raw audio cannot be fitted again: the first line, 0–1500 with
	// a take 200 ms longer, moved to 800–2300 ms, 100 ms before line 2 (now at 2400).
	first := lines[0]
	ftk := takeWith(t, b, first, 1700*48, 0, 330)
	_, err = b.store.ApproveTakeAs(ctx, b.users[studio.RoleEditor].ID, b.project.ID, ftk.ID)
	require.NoError(t, err)
	first = *mustLine(t, b, first.ID)
	resp = c.htmx("POST", fmt.Sprintf("/projects/%d/lines/%d/slot", b.project.ID, first.ID), slotForm(strconv.Itoa(first.Revision), "800", "2300"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, doc(t, resp).Find(`#timeline-notice[hx-swap-oob]`).Text(), "kept")
	saved = mustLine(t, b, first.ID)
	require.Equal(t, studio.StateQueued, saved.State, "rendered again for its new place")
	require.Equal(t, first.RenderSeq+1, saved.RenderSeq)
	require.Equal(t, 1, jobs("synthesize_line", first.ID))
	require.Nil(t, saved.ApprovedTakeID, "its approval was of a take that ran into the next line")
}

func TestSlotChangeRefusesBadInputWith422(t *testing.T) {
	t.Parallel()
	b := setupQueueing(t)
	l := b.allLines(t)[0]
	c := b.as(t, studio.RoleEditor)
	path := fmt.Sprintf("/projects/%d/lines/%d/slot", b.project.ID, l.ID)
	rev := strconv.Itoa(l.Revision)
	for name, form := range map[string]url.Values{
		"no fields":          {},
		"not a number":       slotForm(rev, "1.5s", "3000"),
		"negative start":     slotForm(rev, "-40", "1000"),
		"end before start":   slotForm(rev, "2000", "1960"),
		"no revision":        slotForm("", "0", "1000"),
		"longer than a line": slotForm(rev, "0", strconv.Itoa(studio.DefaultMaxLineMs+1)),
		// Past what the database's integer milliseconds hold (about 596 h): a 500.
		"past the integer":  slotForm(rev, "3000000000", "3000000500"),
		"past the import's": slotForm(rev, "1800000000", "1800000500"),
	} {
		resp := c.htmx("POST", path, form)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, name)
		msg := doc(t, resp).Find(`#timeline-notice`).Text()
		require.NotEmpty(t, msg, name)
		require.Equal(t, l, *mustLine(t, b, l.ID), "%s: nothing changed", name)
	}
	resp := c.htmx("POST", path, slotForm(rev, "0", strconv.Itoa(studio.DefaultMaxLineMs+1)))
	require.Contains(t, doc(t, resp).Find(`#timeline-notice`).Text(), "at most 60 s")
	resp = c.htmx("POST", path, slotForm(rev, "3000000000", "3000000500"))
	require.Contains(t, doc(t, resp).Find(`#timeline-notice`).Text(), "A slot ends by 499:59:59.999 at the latest.")
}

func TestSlotChangeNeedsAMemberAndAnActiveProject(t *testing.T) {
	t.Parallel()
	b := setupQueueing(t)
	ctx := context.Background()
	l := b.allLines(t)[0]
	path := fmt.Sprintf("/projects/%d/lines/%d/slot", b.project.ID, l.ID)
	form := slotForm(strconv.Itoa(l.Revision), "500", "1500")

	outsider := b.asUser(t, studiotest.User(t, b.store, studio.RoleEditor))
	require.Equal(t, http.StatusNotFound, outsider.htmx("POST", path, form).StatusCode)
	require.Equal(t, http.StatusNotFound, outsider.get(fmt.Sprintf("/projects/%d/timeline", b.project.ID)).StatusCode)
	require.Equal(t, l, *mustLine(t, b, l.ID))

	require.NoError(t, b.store.SetProjectArchived(ctx, b.project.ID, true))
	c := b.as(t, studio.RoleEditor)
	require.Equal(t, http.StatusConflict, c.htmx("POST", path, form).StatusCode)
	require.Equal(t, l, *mustLine(t, b, l.ID))
	require.Equal(t, http.StatusOK, c.get(fmt.Sprintf("/projects/%d/timeline", b.project.ID)).StatusCode, "an archived project's timeline still shows")
}

func mustLine(t *testing.T, b *testBundle, id int64) *studio.Line {
	t.Helper()
	l, err := b.store.Line(context.Background(), b.project.ID, id)
	require.NoError(t, err)
	return l
}
