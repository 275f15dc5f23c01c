package web_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
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
	require.Equal(t, "48 kHz / 24-bit, Stereo (dual-mono), 10:00:00:00", d.Find(`[data-testid=export-format]`).Text())
	require.Equal(t, "mono", d.Find(`select[name=channels] option[selected]`).AttrOr("value", ""))
	require.Equal(t, "16", d.Find(`select[name=bit_depth] option[selected]`).AttrOr("value", ""))
	require.Equal(t, "00:00:00:00", d.Find(`input[name=start_timecode]`).AttrOr("value", ""))
	require.Zero(t, d.Find(`input[name=speaker_names][checked]`).Length(), "no speaker names by default")
	require.Zero(t, d.Find(`input[name=include_stale][checked]`).Length(), "changed lines left out by default")

	resp = c.do("GET", path, nil, "", map[string]string{"Accept-Language": "zh-CN"})
	d = doc(t, resp)
	require.Equal(t, "已排除（渲染后有修改）：第 2, 3 句", d.Find(`[data-testid=export-left-out]`).Text())
	require.Equal(t, "48 kHz / 24 位, 立体声（双单声道）, 10:00:00:00", d.Find(`[data-testid=export-format]`).Text())
}
