package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"dubstudio/audio"
	"dubstudio/studio"
	"dubstudio/studio/script"
	"dubstudio/workflow"
)

// TestExportOptionsInTheForm edits a line after it was rendered, then exports all
// done takes from the export form with every option set (stereo, 24-bit, a start
// timecode, speaker names): the row lists the changed line as left out and says the
// format, and the archive's manifest, mix and subtitles follow the options. A bad
// timecode is refused with the catalog's message and queues nothing.
func TestExportOptionsInTheForm(t *testing.T) {
	b := setupReview(t)
	ctx := audioBrowser(t)
	bg := context.Background()
	changed := b.lines[1]
	text := "A different second line."
	_, err := b.store.UpdateLine(bg, b.editor.ID, b.project.ID, changed.ID, studio.LineEdit{BaseRevision: changed.Revision, Text: &text})
	require.NoError(t, err)
	base := fmt.Sprintf("%s/projects/%d", b.server.URL, b.project.ID)

	require.NoError(t, chromedp.Do(ctx, login(b.testBundle, b.editor)...))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/exports"),
		chromedp.WaitVisible(css(`[data-testid=export-form]`)),
	))
	// A timecode past midnight is refused: the message, and no export.
	refused, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const f = document.querySelector('[data-testid=export-form]');
		const body = new URLSearchParams(new FormData(f));
		body.set('start_timecode', '24:00:00:00');
		const h = Object.assign({'HX-Request': 'true'}, JSON.parse(document.body.getAttribute('hx-headers')));
		return fetch(f.getAttribute('hx-post'), {method: 'POST', body, headers: h}).then(r => r.text().then(t => r.status + ' ' + t));
	})()`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(refused, "422 "), refused)
	require.Contains(t, refused, "The start timecode &#34;24:00:00:00&#34; is not HH:MM:SS:FF")
	exports, err := b.store.Exports(bg, b.project.ID)
	require.NoError(t, err)
	require.Empty(t, exports)

	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		document.querySelector('input[name=takes][value=done]').checked = true;
		document.querySelector('select[name=channels]').value = 'stereo';
		document.querySelector('select[name=bit_depth]').value = '24';
		document.querySelector('input[name=start_timecode]').value = '01:00:00:00';
		document.querySelector('input[name=speaker_names]').checked = true;
		return true })()`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`[data-testid=start-export]`)),
		chromedp.WaitVisible(css(`[data-testid=export-row][data-state=done] [data-testid=download-export]`)),
	))
	screenshot(t, ctx, "export-options.png")
	leftOut, err := chromedp.Run(ctx, chromedp.Text(css(`[data-testid=export-left-out]`)))
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("Left out, changed since rendering: lines %d", changed.Idx), leftOut)
	format, err := chromedp.Run(ctx, chromedp.Text(css(`[data-testid=export-format]`)))
	require.NoError(t, err)
	require.Equal(t, "48 kHz / 24-bit, Stereo (dual-mono), 01:00:00:00 at 25 fps", format)

	dataURL, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.querySelector('[data-testid=download-export]').href)
		.then(r => r.blob()).then(blob => new Promise(done => { const fr = new FileReader(); fr.onload = () => done(fr.result); fr.readAsDataURL(blob); }))`,
		chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	data, err := base64.StdEncoding.DecodeString(dataURL[strings.Index(dataURL, ",")+1:])
	require.NoError(t, err)
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	entries := map[string][]byte{}
	for _, f := range zr.File {
		r, err := f.Open()
		require.NoError(t, err)
		entries[f.Name], err = io.ReadAll(r)
		require.NoError(t, err)
		r.Close()
	}
	var man workflow.Manifest
	require.NoError(t, json.Unmarshal(entries["manifest.json"], &man))
	require.Len(t, man.Lines, len(b.lines)-1)
	require.Len(t, man.LeftOut, 1)
	require.Equal(t, changed.Idx, man.LeftOut[0].Index)
	require.Equal(t, 2, man.Channels)
	require.Equal(t, 24, man.BitDepth)
	require.Equal(t, int64(3600*48000), man.TimeReference)
	ref, ok, err := audio.ReadTimeReference(bytes.NewReader(entries["mix.wav"]))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, man.TimeReference, ref)
	cues, err := script.Parse("subtitles.srt", entries["subtitles.srt"])
	require.NoError(t, err)
	require.Len(t, cues, len(man.Lines))
	require.Equal(t, man.Lines[0].Character, cues[0].Character, "speaker names, as asked")
	require.NotEmpty(t, cues[0].Character)

	// The row's words come from the catalog in Chinese too.
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const s = document.querySelector('[data-testid=lang-select]');
		s.value = 'zh'; s.form.submit(); return true })()`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(css(`html[lang=zh]`)),
		chromedp.Navigate(base+"/exports"),
		chromedp.WaitVisible(css(`[data-testid=export-left-out]`)),
	))
	zh, err := chromedp.Run(ctx, chromedp.Text(css(`[data-testid=exports]`)))
	require.NoError(t, err)
	require.Contains(t, zh, fmt.Sprintf("已排除（渲染后有修改）：第 %d 句", changed.Idx))
	require.Contains(t, zh, "48 kHz / 24 位")
}
