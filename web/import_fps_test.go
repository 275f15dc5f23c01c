package web_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// framesCSV is a dubbing spreadsheet whose TC in and out count frames, drop-frame
// where written with ";".
const framesCSV = "TC in,TC out,Character,Dialogue\n" +
	"00:00:01:12,00:00:02:00,ANNE,Bonjour.\n" +
	"00:01:00;02,00:01:01;00,PAUL,Salut.\n"

// importFPSForm returns the import panel's frame-rate select as the project page
// renders it: the value it sends unless the editor changes it.
func importFPSForm(t *testing.T, c *client, projectID int64) (string, *goquery.Selection) {
	t.Helper()
	sel := doc(t, c.get(fmt.Sprintf("/projects/%d", projectID))).Find(`[data-testid=import-form] select[name=fps]`)
	require.Equal(t, 1, sel.Length(), "the import form has a frame-rate select")
	opt := sel.Find(`option[selected]`)
	if opt.Length() == 0 {
		opt = sel.Find(`option`).First()
	}
	return opt.AttrOr("value", "?"), sel
}

// TestImportFrameTimecodesAtTheChosenRate previews and confirms a CSV whose TC in/out
// count frames: the preview says the rate and shows the times in milliseconds, the
// confirm stores them, and a confirm at another rate than the preview's is previewed
// again. The default rate is the project video's, else 25.
func TestImportFrameTimecodesAtTheChosenRate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.as(t, studio.RoleEditor)
	hdr := map[string]string{"HX-Request": "true", "X-CSRF-Token": c.csrf}
	post := func(projectID int64, fields map[string]string) *http.Response {
		body, ct := importForm(t, "dub.csv", []byte(framesCSV), fields)
		return c.do("POST", fmt.Sprintf("/projects/%d/import", projectID), body, ct, hdr)
	}
	times := func(projectID int64) [][2]int {
		ls, err := b.store.AllLines(ctx, projectID)
		require.NoError(t, err)
		var out [][2]int
		for _, l := range ls {
			out = append(out, [2]int{l.StartMs, l.EndMs})
		}
		return out
	}

	// A project whose source video plays at 30000/1001: its rate is the default.
	p := studiotest.Project(t, b.store, b.users[studio.RoleEditor], 0)
	sha := strings.Repeat("c", 64)
	studiotest.Exec(t, b.store, `INSERT INTO blobs (sha256, size_bytes, format, duration_ms, sample_rate, channels) VALUES ($1, 1, 'mp4', 120000, 48000, 2)`, sha)
	num, den := 30000, 1001
	_, err := b.store.SetProjectVideo(ctx, studio.ProjectVideo{ProjectID: p.ID, VideoSHA256: sha, FileName: "ep1.mov",
		DurationMs: 120000, Width: 1920, Height: 1080, FrameRateNum: &num, FrameRateDen: &den},
		func(context.Context, *sql.Tx, *studio.ProjectVideo) error { return nil })
	require.NoError(t, err)
	def, sel := importFPSForm(t, c, p.ID)
	exportFPS := func(projectID int64) string {
		d := doc(t, c.get(fmt.Sprintf("/projects/%d/exports", projectID)))
		return d.Find(`select[name=fps] option[selected]`).AttrOr("value", "")
	}
	require.Equal(t, "29.97", exportFPS(p.ID), "the export form counts the start timecode at the video's rate")
	for _, want := range []string{"23.976", "24", "25", "29.97", "30", "50", "59.94", "60"} {
		require.Equal(t, 1, sel.Find(fmt.Sprintf(`option[value=%q]`, want)).Length(), want)
	}

	// Preview at the default: 29.97, drop-frame for ";"; nothing written.
	resp := post(p.ID, map[string]string{"preview": "1", "fps": def})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	d := doc(t, resp)
	require.Contains(t, d.Find(`[data-testid=import-fps]`).Text(), "29.97 fps")
	require.Contains(t, d.Find(`[data-testid=import-fps]`).Text(), "video")
	rows := d.Find(`[data-testid=import-row] [data-testid=import-row-time]`)
	require.Equal(t, 2, rows.Length())
	require.Equal(t, "00:00:01.401 – 00:00:02.002", strings.TrimSpace(rows.First().Text()))
	require.Equal(t, "00:01:00.060 – 00:01:00.994", strings.TrimSpace(rows.Last().Text()))
	// Above each reading, the file's own timecodes, for the editor to check the rate by.
	source := d.Find(`[data-testid=import-row] [data-testid=import-row-source-time]`)
	require.Equal(t, 2, source.Length())
	require.Equal(t, "00:00:01:12 – 00:00:02:00", strings.TrimSpace(source.First().Text()))
	require.Equal(t, "00:01:00;02 – 00:01:01;00", strings.TrimSpace(source.Last().Text()))
	sum := d.Find(`input[name=sha256]`).AttrOr("value", "")
	previewed, ok := d.Find(`input[name=fps_previewed]`).Attr("value")
	require.True(t, ok, "the preview carries the rate it counted at")
	require.Equal(t, "29.97", previewed)
	require.Empty(t, times(p.ID), "a preview writes nothing")

	// A confirm at another rate than the preview's (the select changed, its preview
	// not back yet) is not imported: previewed again. Here a file without drop-frame,
	// which 24 and 25 both read.
	ndf := strings.ReplaceAll(framesCSV, ";", ":")
	body, ct := importForm(t, "dub.csv", []byte(ndf), map[string]string{"preview": "1", "fps": "24"})
	d = doc(t, c.do("POST", fmt.Sprintf("/projects/%d/import", p.ID), body, ct, hdr))
	require.Contains(t, d.Find(`[data-testid=import-fps]`).Text(), "24 fps")
	body, ct = importForm(t, "dub.csv", []byte(ndf), map[string]string{"preview": "0", "fps": "25",
		"sha256": d.Find(`input[name=sha256]`).AttrOr("value", ""), "fps_previewed": d.Find(`input[name=fps_previewed]`).AttrOr("value", "")})
	resp = c.do("POST", fmt.Sprintf("/projects/%d/import", p.ID), body, ct, hdr)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, doc(t, resp).Find(`[data-testid=import-problems]`).Text(), "frame rate changed")
	require.Empty(t, times(p.ID))

	// The confirm, with the form as the preview left it, stores those times.
	resp = post(p.ID, map[string]string{"preview": "0", "sha256": sum, "fps_previewed": previewed, "fps": def})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 1, doc(t, resp).Find(`[data-testid=import-ok]`).Length())
	require.Equal(t, [][2]int{{1401, 2002}, {60060, 60994}}, times(p.ID))

	// Without a video the default is 25, where ";" is refused on its line.
	q := studiotest.Project(t, b.store, b.users[studio.RoleEditor], 0)
	def, _ = importFPSForm(t, c, q.ID)
	require.Equal(t, "25", exportFPS(q.ID))
	resp = post(q.ID, map[string]string{"preview": "1", "fps": def})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, doc(t, resp).Find(`[data-testid=import-problems]`).Text(), `line 3: Timecode "00:01:00;02" is drop-frame`)

	// A rate chosen in the select: 24 fps, no drop-frame in the file.
	body, ct = importForm(t, "dub.csv", []byte(ndf), map[string]string{"preview": "0", "fps": "24"})
	resp = c.do("POST", fmt.Sprintf("/projects/%d/import", q.ID), body, ct, hdr)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, [][2]int{{1500, 2000}, {60083, 61000}}, times(q.ID))

	// Frames at or past the rate: refused with the line and the range.
	body, ct = importForm(t, "dub.csv", []byte(ndf), map[string]string{"preview": "1", "fps": "23.976"})
	resp = c.do("POST", fmt.Sprintf("/projects/%d/import", q.ID), body, ct, hdr)
	require.Equal(t, http.StatusOK, resp.StatusCode, "1:12 and 1:00:02 are frames at 23.976")
	body, ct = importForm(t, "dub.csv", []byte("start,end,character,text\n00:00:01:24,00:00:02:00,ANNE,Hi\n"),
		map[string]string{"preview": "1", "fps": "24"})
	resp = c.do("POST", fmt.Sprintf("/projects/%d/import", q.ID), body, ct, hdr)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, doc(t, resp).Find(`[data-testid=import-problems]`).Text(), "line 2: Bad timecode \"00:00:01:24\": at 24 fps the frames run from 00 to 23")

	// An unknown rate is refused as an unknown encoding is.
	body, ct = importForm(t, "dub.csv", []byte(ndf), map[string]string{"preview": "1", "fps": "12"})
	resp = c.do("POST", fmt.Sprintf("/projects/%d/import", q.ID), body, ct, hdr)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
}
