package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/script"
)

// TestScriptDownloadSpeakerNames: the script downloads give SRT and WebVTT without
// speaker names unless asked for, and CSV and ASS with them always; each file reads
// back as the project's lines (times, text and, where written, characters).
func TestScriptDownloadSpeakerNames(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.as(t, studio.RoleEditor)
	lines, err := b.store.AllLines(context.Background(), b.project.ID)
	require.NoError(t, err)
	require.Len(t, lines, 3)
	who := []string{"Alice", "Bob", "Alice"}

	tests := []struct {
		path, contentType, ext string
		speakers               bool
	}{
		{"/export.srt", "application/x-subrip; charset=utf-8", "srt", false},
		{"/export.srt?speakers=0", "application/x-subrip; charset=utf-8", "srt", false},
		{"/export.srt?speakers=1", "application/x-subrip; charset=utf-8", "srt", true},
		{"/export.vtt", "text/vtt; charset=utf-8", "vtt", false},
		{"/export.vtt?speakers=1", "text/vtt; charset=utf-8", "vtt", true},
		{"/export.ass", "text/x-ssa; charset=utf-8", "ass", true},
		{"/export.csv", "text/csv; charset=utf-8", "csv", true},
		// The download form.
		{"/export?format=vtt", "text/vtt; charset=utf-8", "vtt", false},
		{"/export?format=vtt&speakers=1", "text/vtt; charset=utf-8", "vtt", true},
		{"/export?format=srt&speakers=1", "application/x-subrip; charset=utf-8", "srt", true},
		{"/export?format=ass", "text/x-ssa; charset=utf-8", "ass", true},
		{"/export", "application/x-subrip; charset=utf-8", "srt", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp := c.get(fmt.Sprintf("/projects/%d%s", b.project.ID, tt.path))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, tt.contentType, resp.Header.Get("Content-Type"))
			require.Contains(t, resp.Header.Get("Content-Disposition"), "."+tt.ext+`"`)
			data, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, script.Format(tt.ext), script.Detect("download", data))
			cues, err := script.Parse("download", data)
			require.NoError(t, err, string(data))
			require.Len(t, cues, len(lines))
			for i, cue := range cues {
				require.Equal(t, time.Duration(lines[i].StartMs)*time.Millisecond, cue.Start)
				require.Equal(t, time.Duration(lines[i].EndMs)*time.Millisecond, cue.End)
				require.Equal(t, lines[i].Text, cue.Text, "byte-identical text")
				if tt.speakers {
					require.Equal(t, who[i], cue.Character)
				} else {
					require.Empty(t, cue.Character)
					require.NotContains(t, string(data), who[i])
				}
			}
			if tt.ext == "vtt" && tt.speakers {
				require.Contains(t, string(data), "<v Alice>", "WebVTT names speakers with voice spans")
			}
		})
	}

	resp := c.get(fmt.Sprintf("/projects/%d/export?format=docx", b.project.ID))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, doc(t, resp).Find(`[data-testid=error-message]`).Text(), `Unknown script format "docx"`)

	// The project page offers the formats and the option.
	d := doc(t, c.get(fmt.Sprintf("/projects/%d", b.project.ID)))
	form := d.Find(`form[data-testid=script-download]`)
	require.Equal(t, fmt.Sprintf("/projects/%d/export", b.project.ID), form.AttrOr("action", ""))
	var formats []string
	form.Find(`select[name=format] option`).Each(func(_ int, o *goquery.Selection) { formats = append(formats, o.AttrOr("value", "")) })
	require.Equal(t, []string{"srt", "vtt", "ass", "csv"}, formats)
	require.Equal(t, 1, form.Find(`input[type=checkbox][name=speakers]`).Length())
	_, checked := form.Find(`input[name=speakers]`).Attr("checked")
	require.False(t, checked, "no speaker names by default")
}
