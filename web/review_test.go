package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"dubstudio/audio"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// takeWith stores a take of line l whose audio is n samples of a tone at 48 kHz
// (silent for the first lead samples), as the fit job would.
func takeWith(t *testing.T, b *testBundle, l studio.Line, n, lead int, freq float64) *studio.Take {
	t.Helper()
	dir := filepath.Join(b.cfg.DataDir, "tmp")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	return studiotest.Take(t, b.store, studio.BlobStore{Dir: filepath.Join(b.cfg.DataDir, "blobs")}, dir, l, n, lead, freq)
}

func (b *testBundle) allLines(t *testing.T) []studio.Line {
	t.Helper()
	ls, err := b.store.AllLines(context.Background(), b.project.ID)
	require.NoError(t, err)
	return ls
}

func TestReviewRoutesNeedAnEditor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := b.allLines(t)[0]
	p := fmt.Sprintf("/projects/%d", b.project.ID)
	routes := []struct{ method, path string }{
		{"GET", p + "/review"},
		{"GET", fmt.Sprintf("%s/review?line=%d", p, l.ID)},
		{"GET", fmt.Sprintf("%s/lines/%d/review-status", p, l.ID)},
		{"GET", fmt.Sprintf("%s/lines/%d/source.wav", p, l.ID)},
		{"POST", p + "/review/takes/999999/approve"},
		{"POST", p + "/review/takes/999999/use"},
		{"POST", p + "/review/takes/999999/comments"},
		{"POST", fmt.Sprintf("%s/review/lines/%d/render", p, l.ID)},
		{"POST", fmt.Sprintf("%s/review/lines/%d/source-emotion", p, l.ID)},
		{"POST", fmt.Sprintf("%s/lines/%d/approve", p, l.ID)},
		{"POST", p + "/lines/range"},
		{"POST", p + "/source"},
		{"POST", p + "/source/delete"},
	}
	anon := b.anon(t)
	for _, who := range []studio.Role{studio.RoleEditor, studio.RoleManager, studio.RoleAdmin} {
		c := b.as(t, who)
		for _, rt := range routes {
			var resp *http.Response
			if rt.method == "GET" {
				resp = c.get(rt.path)
			} else {
				resp = c.post(rt.path, nil, true)
			}
			require.NotContains(t, []int{http.StatusForbidden, http.StatusUnauthorized, http.StatusInternalServerError}, resp.StatusCode,
				"%s %s as %s", rt.method, rt.path, who)
		}
	}
	for _, rt := range routes {
		if rt.method == "GET" {
			resp := anon.get(rt.path)
			require.Equal(t, http.StatusSeeOther, resp.StatusCode, rt.path)
			require.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/login?next="), rt.path)
		} else {
			require.Contains(t, []int{http.StatusForbidden, http.StatusUnauthorized}, anon.post(rt.path, nil, true).StatusCode, rt.path)
			require.Equal(t, http.StatusForbidden, b.as(t, studio.RoleEditor).post(rt.path, nil, false).StatusCode, "%s without CSRF", rt.path)
		}
	}
}

func TestReviewPageShowsTakesOverTheirSlot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.as(t, studio.RoleEditor)
	lines := b.allLines(t)
	l := lines[1] // 2.000-3.500 s
	// The first take has 0.1 s of silence, then 1.6 s of tone: 0.1 s borrowed.
	first := takeWith(t, b, l, 81600, 4800, 220)
	second := takeWith(t, b, l, 72000, 0, 330)

	resp := c.get(fmt.Sprintf("/projects/%d/review?line=%d", b.project.ID, l.ID))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	d := doc(t, resp)
	require.Equal(t, 1, d.Find(`script[src="/static/vendor/wavesurfer.min.js"]`).Length(), "wavesurfer on the review page")
	require.Equal(t, 1, d.Find(`script[src="/static/vendor/wavesurfer-regions.min.js"]`).Length())
	require.Contains(t, d.Find(`[data-testid=review-timecodes]`).Text(), "00:00:02.000 → 00:00:03.500")
	require.Contains(t, d.Find(`[data-testid=review-position]`).Text(), "Line 2 of 3")
	prev, _ := d.Find(`[data-nav=prev]`).Attr("hx-get")
	require.Equal(t, fmt.Sprintf("/projects/%d/review?line=%d", b.project.ID, lines[0].ID), prev)
	takes := d.Find(`[data-testid=review-take]`)
	require.Equal(t, 2, takes.Length())
	// Newest first; the current one is the newest.
	id, _ := takes.Eq(0).Attr("data-take-id")
	require.Equal(t, fmt.Sprint(second.ID), id)
	require.True(t, takes.Eq(0).HasClass("current"))
	w := takes.Eq(1).Find(`[data-wave]`)
	for attr, want := range map[string]string{"data-src": "/blobs/" + first.AudioSHA256, "data-slot-ms": "1500",
		"data-borrowed-ms": "200", "data-speech-start-ms": "100"} {
		got, _ := w.Attr(attr)
		require.Equal(t, want, got, attr)
	}
	end, _ := w.Attr("data-speech-end-ms")
	require.Contains(t, []string{"1699", "1700"}, end, "the tone ends at 1.7 s")
	require.Contains(t, takes.Eq(1).Find(`.wave-times`).Text(), "00:00:03.700", "where the take's audio ends")
	require.Zero(t, d.Find(`[data-testid=review-original]`).Length(), "no source audio, no original")

	// The script page does not load wavesurfer nor the review view's script; every
	// page has the shortcuts.
	require.Equal(t, 1, d.Find(`script[type=module][src="/static/js/review.js"]`).Length())
	pd := doc(t, c.get(fmt.Sprintf("/projects/%d", b.project.ID)))
	require.Zero(t, pd.Find(`script[src*=wavesurfer]`).Length())
	require.Zero(t, pd.Find(`script[src="/static/js/review.js"]`).Length())
	require.Equal(t, 1, pd.Find(`script[type=module][src="/static/js/script_table.js"]`).Length())
	// The script table's keys and ▶ find their URLs in the row, not in the address.
	row := pd.Find(fmt.Sprintf(`#line-%d`, l.ID))
	for attr, want := range map[string]string{
		"data-original-url": fmt.Sprintf("/projects/%d/lines/%d/source.wav", b.project.ID, l.ID),
		"data-approve-url":  fmt.Sprintf("/projects/%d/lines/%d/approve", b.project.ID, l.ID),
	} {
		got, _ := row.Attr(attr)
		require.Equal(t, want, got, attr)
	}
	play, _ := row.Find(`button[data-play-url]`).Attr("data-play-url")
	require.Equal(t, "/blobs/"+second.AudioSHA256, play, "the current take")
	require.Equal(t, 1, pd.Find(`[data-testid=kb-help]`).Length())
	require.Equal(t, 1, pd.Find(`[data-testid=review-link]`).Length())

	// htmx gets the panel only, except when restoring history.
	resp = c.htmx("GET", fmt.Sprintf("/projects/%d/review?line=%d", b.project.ID, lines[0].ID), nil)
	body := readAll(t, resp)
	require.True(t, strings.HasPrefix(strings.TrimSpace(body), `<div id="review-panel"`), body[:min(len(body), 200)])
	resp = c.do("GET", fmt.Sprintf("/projects/%d/review?line=%d", b.project.ID, lines[0].ID), nil, "",
		map[string]string{"HX-Request": "true", "HX-History-Restore-Request": "true"})
	require.Contains(t, readAll(t, resp), "<html")

	// Without ?line the view opens the first line with a take to approve.
	d = doc(t, c.get(fmt.Sprintf("/projects/%d/review", b.project.ID)))
	lid, _ := d.Find(`#review-panel`).Attr("data-line-id")
	require.Equal(t, fmt.Sprint(l.ID), lid)
	require.Equal(t, http.StatusNotFound, c.get(fmt.Sprintf("/projects/%d/review?line=999999", b.project.ID)).StatusCode)
	require.Equal(t, http.StatusBadRequest, c.get(fmt.Sprintf("/projects/%d/review?line=x", b.project.ID)).StatusCode)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestReviewActionsKeepAHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.as(t, studio.RoleEditor)
	lines := b.allLines(t)
	l := lines[0]
	first := takeWith(t, b, l, 72000, 0, 220)
	second := takeWith(t, b, l, 72000, 0, 440)
	p := fmt.Sprintf("/projects/%d", b.project.ID)

	resp := c.htmx("POST", fmt.Sprintf("%s/review/takes/%d/approve", p, second.ID), url.Values{})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	d := doc(t, resp)
	require.Equal(t, 1, d.Find(`#take-`+fmt.Sprint(second.ID)+` [data-testid=review-approved]`).Length())

	resp = c.htmx("POST", fmt.Sprintf("%s/review/takes/%d/use", p, first.ID), url.Values{})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got, err := b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, first.ID, *got.CurrentTakeID, "back to the first take")
	require.Nil(t, got.ApprovedTakeID)

	resp = c.htmx("POST", fmt.Sprintf("%s/review/takes/%d/comments", p, first.ID), url.Values{"body": {"   "}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	d = doc(t, resp)
	require.Contains(t, d.Find(`#take-`+fmt.Sprint(first.ID)+` [data-testid=field-error]`).Text(), "1 to 2000")

	resp = c.htmx("POST", fmt.Sprintf("%s/review/takes/%d/comments", p, first.ID), url.Values{"body": {`<script>alert(1)</script> too "fast"`}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	html := readAll(t, resp)
	require.NotContains(t, html, "<script>alert(1)</script>")
	require.Contains(t, html, "&lt;script&gt;alert(1)&lt;/script&gt;")

	h, err := b.store.ReviewHistory(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Len(t, h, 3)
	require.Equal(t, studio.ReviewApprove, h[0].Action)
	require.Equal(t, studio.ReviewUse, h[1].Action)
	require.Equal(t, studio.ReviewComment, h[2].Action)
	require.Equal(t, b.users[studio.RoleEditor].ID, *h[2].UserID)

	// A take of another project is not found through this one.
	other, err := b.store.CreateProject(ctx, "Other", nil)
	require.NoError(t, err)
	resp = c.htmx("POST", fmt.Sprintf("/projects/%d/review/takes/%d/approve", other.ID, first.ID), url.Values{})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	// The a key of the script approves the line's current take and answers its row.
	resp = c.htmx("POST", fmt.Sprintf("%s/lines/%d/approve", p, l.ID), url.Values{})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	row := readAll(t, resp)
	require.Contains(t, row, fmt.Sprintf(`id="line-%d"`, l.ID))
	require.Contains(t, row, `class="approved"`)
	got, err = b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, first.ID, *got.ApprovedTakeID)
	resp = c.htmx("POST", fmt.Sprintf("%s/lines/%d/approve", p, lines[2].ID), url.Values{})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "no take to approve")

	// Regenerating needs the render pipeline, which this server has not.
	resp = c.htmx("POST", fmt.Sprintf("%s/review/lines/%d/render", p, l.ID), url.Values{})
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	// The status poll asks the panel to reload once the line is no longer rendering.
	resp = c.htmx("GET", fmt.Sprintf("%s/lines/%d/review-status", p, l.ID), nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, "review-refresh", resp.Header.Get("HX-Trigger"))
	studiotest.Exec(t, b.store, `UPDATE lines SET state = 'synthesizing' WHERE id = $1`, l.ID)
	resp = c.htmx("GET", fmt.Sprintf("%s/lines/%d/review-status", p, l.ID), nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Empty(t, resp.Header.Get("HX-Trigger"))
}

// TestPlayRangeIsTheTimeline assembles lines as the export does: each take at its
// timecode to the sample, silence between, and the same range is made once.
func TestPlayRangeIsTheTimeline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.as(t, studio.RoleEditor)
	lines := b.allLines(t) // 0-1.5 s, 2-3.5 s, 4-5.5 s
	// A first take of line 2 that is approved, then a newer current one: the range
	// plays the approved take, as the export of approved takes would.
	approved := takeWith(t, b, lines[1], 72000, 0, 330)
	require.NoError(t, b.store.ApproveTake(ctx, b.users[studio.RoleEditor].ID, b.project.ID, approved.ID))
	takeWith(t, b, lines[1], 72000, 0, 990)
	third := takeWith(t, b, lines[2], 76800, 0, 440) // 1.6 s: 0.1 s past its slot
	p := fmt.Sprintf("/projects/%d/lines/range", b.project.ID)

	form := url.Values{"line_id": {fmt.Sprint(lines[2].ID), fmt.Sprint(lines[1].ID)}}
	resp := c.htmx("POST", p, form)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	d := doc(t, resp)
	src, ok := d.Find(`[data-testid=range-audio]`).Attr("src")
	require.True(t, ok)
	require.Contains(t, d.Text(), "Lines 2–3")
	sum := strings.TrimPrefix(src, "/blobs/")
	bs := studio.BlobStore{Dir: filepath.Join(b.cfg.DataDir, "blobs")}
	path, err := bs.Path(sum)
	require.NoError(t, err)
	mix, err := audio.ReadWAVFile(path)
	require.NoError(t, err)
	// From line 2's start (2.000 s) to the end of line 3's audio (5.600 s).
	require.Equal(t, int(audio.SamplesFor(5600, 48000)-audio.SamplesFor(2000, 48000)), mix.Frames())
	for _, tc := range []struct {
		take  *studio.Take
		start int
	}{{approved, 2000}, {third, 4000}} {
		tp, _ := bs.Path(tc.take.AudioSHA256)
		pcm, err := audio.ReadWAVFile(tp)
		require.NoError(t, err)
		off := audio.SamplesFor(tc.start, 48000) - audio.SamplesFor(2000, 48000)
		require.Equal(t, pcm.Samples, mix.Samples[off:off+int64(pcm.Frames())], "take at %d ms", tc.start)
	}
	gap := mix.Samples[72000:96000] // 3.5 s to 4.0 s
	require.Equal(t, make([]int16, len(gap)), gap, "silence between the lines")

	// The same range again is the same blob, made once.
	again := doc(t, c.htmx("POST", p, form))
	src2, _ := again.Find(`[data-testid=range-audio]`).Attr("src")
	require.Equal(t, src, src2)
	var n int
	require.NoError(t, b.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM derived_audio WHERE key LIKE 'range:%'`).Scan(&n))
	require.Equal(t, 1, n)

	require.Equal(t, http.StatusUnprocessableEntity, c.htmx("POST", p, url.Values{}).StatusCode, "nothing selected")
	resp = c.htmx("POST", p, url.Values{"line_id": {fmt.Sprint(lines[0].ID)}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "a line without a take")
	studiotest.Exec(t, b.store, `UPDATE lines SET end_ms = 900000 WHERE id = $1`, lines[2].ID)
	resp = c.htmx("POST", p, form)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "too long to play")
}

// sourceFile makes a short video (or audio) file with ffmpeg.
func sourceFile(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg is not installed")
	}
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("ffmpeg", append(append([]string{"-v", "error"}, args...), "-y", out)...)
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, string(msg))
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	return data
}

func TestSourceUploadAndSegments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.as(t, studio.RoleEditor)
	lines := b.allLines(t)
	p := fmt.Sprintf("/projects/%d", b.project.ID)
	upload := func(name string, data []byte) *http.Response {
		body, ct := multipartBody(t, "file", name, data)
		return c.do("POST", p+"/source", body, ct, map[string]string{"HX-Request": "true", "X-CSRF-Token": c.csrf})
	}

	// Not audio, whatever its name says.
	resp := upload("episode.mp4", []byte("this is a text file"))
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.NotEmpty(t, doc(t, resp).Find(`[data-testid=source-error]`).Text())
	// A video without a sound track.
	silent := sourceFile(t, "silent.mp4", "-f", "lavfi", "-i", "testsrc=size=64x36:rate=5:duration=1", "-c:v", "libx264", "-pix_fmt", "yuv420p")
	resp = upload("silent.mp4", silent)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)

	video := sourceFile(t, "episode.mp4", "-f", "lavfi", "-i", "testsrc=size=64x36:rate=5:duration=5",
		"-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100:duration=5", "-shortest",
		"-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac")
	// Larger than the source limit: refused.
	b.cfg.SourceMaxUploadBytes = int64(len(video) - 1)
	resp = upload("episode.mp4", video)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	_, err := b.store.ProjectSource(ctx, b.project.ID)
	require.ErrorIs(t, err, studio.ErrNotFound)
	b.cfg.SourceMaxUploadBytes = 64 << 20
	resp = upload(`..\..\season 1/episode 7.mp4`, video)
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp))
	require.Contains(t, resp.Header.Get("HX-Trigger"), "review-refresh")
	src, err := b.store.ProjectSource(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, "episode 7.mp4", src.FileName, "a display name, never a path")
	require.InDelta(t, 5000, src.DurationMs, 100)
	// The source limit is its own: a recording past MAX_UPLOAD_MB (1 MiB here)
	// replaces the video.
	wav := sourceFile(t, "dialogue.wav", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=12", "-ac", "2")
	require.Greater(t, len(wav), 1<<20)
	resp = upload("dialogue.wav", wav)
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp))
	src, err = b.store.ProjectSource(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, "dialogue.wav", src.FileName)
	require.Equal(t, 2, src.Channels)
	require.InDelta(t, 12000, src.DurationMs, 50)
	bs := studio.BlobStore{Dir: filepath.Join(b.cfg.DataDir, "blobs")}
	sp, _ := bs.Path(src.AudioSHA256)
	whole, err := audio.ReadWAVFile(sp)
	require.NoError(t, err, "the sound track is kept as 48 kHz WAV")
	require.Equal(t, 48000, whole.SampleRate)
	left, _ := filepath.Glob(filepath.Join(b.cfg.DataDir, "tmp", "source-*"))
	require.Empty(t, left, "the upload itself is not kept")

	// Each line plays its segment: exactly its slot, cut once.
	seg := c.get(fmt.Sprintf("%s/lines/%d/source.wav", p, lines[1].ID))
	require.Equal(t, http.StatusOK, seg.StatusCode)
	require.Equal(t, "audio/wav", seg.Header.Get("Content-Type"))
	pcm, err := audio.ReadWAV(seg.Body)
	require.NoError(t, err)
	require.Equal(t, int(audio.SamplesFor(1500, 48000)), pcm.Frames())
	require.Equal(t, http.StatusOK, c.get(fmt.Sprintf("%s/lines/%d/source.wav", p, lines[1].ID)).StatusCode)
	var n int
	require.NoError(t, b.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM derived_audio WHERE key LIKE 'segment:%'`).Scan(&n))
	require.Equal(t, 1, n)
	// A line after the end of the source has no segment.
	studiotest.Exec(t, b.store, `UPDATE lines SET start_ms = 19000, end_ms = 19500 WHERE id = $1`, lines[2].ID)
	require.Equal(t, http.StatusNotFound, c.get(fmt.Sprintf("%s/lines/%d/source.wav", p, lines[2].ID)).StatusCode)

	// The review view shows the original beside the takes and offers it as the
	// emotion reference of the line or of its character.
	d := doc(t, c.get(fmt.Sprintf("%s/review?line=%d", p, lines[1].ID)))
	require.Equal(t, 1, d.Find(`[data-testid=review-original]`).Length())
	l := lines[1]
	resp = c.htmx("POST", fmt.Sprintf("%s/review/lines/%d/source-emotion", p, l.ID),
		url.Values{"scope": {"line"}, "weight": {"0.65"}, "base_revision": {fmt.Sprint(l.Revision)}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 1, doc(t, resp).Find(`[data-testid=follows-source]`).Length())
	got, err := b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, studio.SourceEmotion(l.StartMs, l.EndMs, 0.65), *got.Emotion)
	// A stale revision is a conflict, shown in the panel.
	resp = c.htmx("POST", fmt.Sprintf("%s/review/lines/%d/source-emotion", p, l.ID),
		url.Values{"scope": {"line"}, "weight": {"0.65"}, "base_revision": {fmt.Sprint(l.Revision)}})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.NotEmpty(t, doc(t, resp).Find(`[data-testid=review-error]`).Text())

	resp = c.htmx("POST", fmt.Sprintf("%s/review/lines/%d/source-emotion", p, l.ID), url.Values{"scope": {"character"}, "weight": {"0.5"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	ch, err := b.store.Character(ctx, b.project.ID, *l.CharacterID)
	require.NoError(t, err)
	require.Equal(t, studio.SourceEmotion(l.StartMs, l.EndMs, 0.5), ch.Emotion)

	// The line editor keeps the original-performance emotion when the text is saved.
	ed := doc(t, c.htmx("GET", fmt.Sprintf("%s/lines/%d/edit", p, l.ID), nil))
	opt := ed.Find(`select[name=emotion_mode] option[selected]`)
	val, _ := opt.Attr("value")
	require.True(t, strings.HasPrefix(val, "source:"), val)
	resp = c.htmx("POST", fmt.Sprintf("%s/lines/%d", p, l.ID), url.Values{"base_revision": {fmt.Sprint(got.Revision)},
		"text": {"New words."}, "start": {"00:00:02.000"}, "end": {"00:00:03.500"}, "duration_lock": {"1"},
		"character_id": {fmt.Sprint(*l.CharacterID)}, "emotion_mode": {val}})
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp))
	got, err = b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, "New words.", got.Text)
	require.Equal(t, studio.SourceEmotion(l.StartMs, l.EndMs, 0.65), *got.Emotion)

	// Removing the source.
	resp = c.htmx("POST", p+"/source/delete", url.Values{})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = b.store.ProjectSource(ctx, b.project.ID)
	require.ErrorIs(t, err, studio.ErrNotFound)
	require.Equal(t, http.StatusNotFound, c.get(fmt.Sprintf("%s/lines/%d/source.wav", p, lines[1].ID)).StatusCode)
}

// A take's resources show under it, with units, in the line panel and the review
// view, in English and Chinese; a take without any (the CPU preview's) shows none.
func TestTakeResourcesAreShown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lines := b.allLines(t)
	l := lines[0]
	tk := takeWith(t, b, l, 48000, 0, 440)
	takeWith(t, b, lines[1], 48000, 0, 440)
	studiotest.Exec(t, b.store, `UPDATE takes SET gpu = 'GPU-abc', peak_vram_bytes = 40500000,
		predicted_vram_bytes = 18000000, measured_vram_bytes = 17500000, kv_bytes = 23000000, activation_bytes = 17500000,
		permit_wait_ms = 1200, host_queue_ms = 300, s2mel_wait_ms = 500, gpt_ms = 2400, s2mel_ms = 450, vocoder_ms = 120,
		batch_rows_mean = 37.5, s2mel_group = 4, gpu_index = 1 WHERE id = $1`, tk.ID)
	c := b.as(t, studio.RoleEditor)
	check := func(d *goquery.Document, en bool) {
		u := d.Find(`[data-testid=take-usage]`)
		require.Equal(t, 1, u.Length(), "only the take with resources")
		text := func(id string) string { return strings.TrimSpace(u.Find(`[data-testid=` + id + `]`).Text()) }
		require.Equal(t, "GPU 1 · GPU-abc", text("usage-gpu"))
		require.Equal(t, "18.0 MB", text("usage-predicted"))
		require.Equal(t, "17.5 MB", text("usage-measured"))
		require.Equal(t, "2.40 s / 0.45 s / 0.12 s", text("usage-stages"))
		if en {
			require.Equal(t, "40.5 MB (KV cache 23.0 MB, activations 17.5 MB)", text("usage-share"))
			require.Equal(t, "2.00 s (waiting for a permit 1.20 s, in the host 0.30 s, for s2mel 0.50 s)", text("usage-queue"))
			require.Equal(t, "37.5 rows per decode step on average · s2mel group of 4", text("usage-batch"))
		} else {
			require.Equal(t, "40.5 MB（KV 缓存 23.0 MB，激活 17.5 MB）", text("usage-share"))
			require.Equal(t, "2.00 s（等待许可 1.20 s，主机内 0.30 s，等待 s2mel 0.50 s）", text("usage-queue"))
		}
	}
	check(doc(t, c.get(fmt.Sprintf("/projects/%d/lines/%d/takes", b.project.ID, l.ID))), true)
	check(doc(t, c.get(fmt.Sprintf("/projects/%d/review?line=%d", b.project.ID, l.ID))), true)
	d := doc(t, c.get(fmt.Sprintf("/projects/%d/lines/%d/takes", b.project.ID, lines[1].ID)))
	require.Zero(t, d.Find(`[data-testid=take-usage]`).Length())
	require.Equal(t, http.StatusSeeOther, c.post("/me/lang", url.Values{"lang": {"zh"}}, true).StatusCode)
	check(doc(t, c.get(fmt.Sprintf("/projects/%d/lines/%d/takes", b.project.ID, l.ID))), false)
}
