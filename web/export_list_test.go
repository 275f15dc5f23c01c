package web_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/script"
)

// TestExportListSaysWhatWasLeftOut: an export's row says its format and lists the
// lines it left out, in English and Chinese; the form offers every option with its
// default chosen.
func TestExportListSaysWhatWasLeftOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	editor := b.users[studio.RoleEditor]
	ex, err := b.store.CreateExport(ctx, b.project.ID, editor.ID, studio.ExportOptions{Stereo: true, BitDepth: 24, StartTimecode: "10:00:00:00"},
		func(context.Context, *sql.Tx, *studio.Export) error { return nil })
	require.NoError(t, err)
	require.NoError(t, b.store.FinishExport(ctx, ex.ID, 1, 22, []studio.LeftOutLine{{Index: 2, Reason: "changed"}, {Index: 3, Reason: "changed"}}, ""))

	c := b.as(t, studio.RoleEditor)
	path := fmt.Sprintf("/projects/%d/exports", b.project.ID)
	resp := c.get(path)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	d := doc(t, resp)
	require.Equal(t, "Left out, changed since rendering: lines 2, 3", d.Find(`[data-testid=export-left-out]`).Text())
	require.Equal(t, "48 kHz / 24-bit, Stereo (dual-mono), 10:00:00:00 at 25 fps", d.Find(`[data-testid=export-format]`).Text())
	require.Equal(t, "mono", d.Find(`select[name=channels] option[selected]`).AttrOr("value", ""))
	require.Equal(t, "16", d.Find(`select[name=bit_depth] option[selected]`).AttrOr("value", ""))
	require.Equal(t, "00:00:00:00", d.Find(`input[name=start_timecode]`).AttrOr("value", ""))
	require.Zero(t, d.Find(`input[name=speaker_names][checked]`).Length(), "no speaker names by default")
	require.Zero(t, d.Find(`input[name=include_stale][checked]`).Length(), "changed lines left out by default")

	resp = c.do("GET", path, nil, "", map[string]string{"Accept-Language": "zh-CN"})
	d = doc(t, resp)
	require.Equal(t, "已排除（渲染后有修改）：第 2, 3 句", d.Find(`[data-testid=export-left-out]`).Text())
	require.Equal(t, "48 kHz / 24 位, 立体声（双单声道）, 10:00:00:00（25 帧/秒）", d.Find(`[data-testid=export-format]`).Text())
}

// TestExportFormTakesEveryFrameRate: the form offers the frame rates an import reads,
// 25 chosen; a 29.97 drop-frame start is queued as sent, and a rate not offered or a
// label drop-frame skips is refused with nothing queued.
func TestExportFormTakesEveryFrameRate(t *testing.T) {
	t.Parallel()
	b := setupQueueing(t)
	ctx := context.Background()
	c := b.as(t, studio.RoleEditor)
	path := fmt.Sprintf("/projects/%d/exports", b.project.ID)
	d := doc(t, c.get(path))
	var offered []string
	d.Find(`select[name=fps] option`).Each(func(_ int, o *goquery.Selection) { offered = append(offered, o.AttrOr("value", "")) })
	require.Equal(t, []string{"23.976", "24", "25", "29.97", "30", "50", "59.94", "60"}, offered)
	require.Equal(t, "25", d.Find(`select[name=fps] option[selected]`).AttrOr("value", ""))

	for _, bad := range []url.Values{
		{"fps": {"29"}, "start_timecode": {"01:00:00:00"}},
		{"fps": {"25"}, "start_timecode": {"01:00:00;00"}},
		{"fps": {"29.97"}, "start_timecode": {"01:01:00;00"}},
	} {
		resp := c.post(path, bad, true)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%v", bad)
		resp.Body.Close()
	}
	exports, err := b.store.Exports(ctx, b.project.ID)
	require.NoError(t, err)
	require.Empty(t, exports, "nothing queued")

	resp := c.post(path, url.Values{"fps": {"29.97"}, "start_timecode": {"01:00:00;00"}}, true)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp.Body.Close()
	exports, err = b.store.Exports(ctx, b.project.ID)
	require.NoError(t, err)
	require.Len(t, exports, 1)
	require.Equal(t, script.FPS2997, exports[0].FPS)
	require.Equal(t, "01:00:00;00", exports[0].StartTimecode)
}
