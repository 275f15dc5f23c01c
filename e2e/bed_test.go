package e2e

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"dubstudio/media/mediatest"
	"dubstudio/workflow"
)

// TestBedInThePreviewAndTheExport uploads a video and an M&E bed through the review
// page's cards (real Chromium), checks that the picture's sound choice plays the dub
// over the bed (the preview asked for with bed=1, playing), then exports with the mix
// over the bed and finds bed.wav and mix_over_bed.wav in the archive and the row.
func TestBedInThePreviewAndTheExport(t *testing.T) {
	b := setupReview(t)
	ctx := audioBrowser(t)
	dir := t.TempDir()
	video := mediatest.Video(t, dir, "scene.mp4", 6, "Where were you last night? Out walking.")
	bed := filepath.Join(dir, "music and effects.wav")
	out, err := exec.Command("ffmpeg", "-v", "error", "-nostdin", "-f", "lavfi", "-i", "aevalsrc=0.1*sin(15000*2*PI*t):s=48000:d=10", bed).CombinedOutput()
	require.NoError(t, err, "%s", out)
	base := fmt.Sprintf("%s/projects/%d", b.server.URL, b.project.ID)

	require.NoError(t, chromedp.Do(ctx, login(b.testBundle, b.editor)...))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/review"),
		chromedp.WaitVisible(css(`[data-testid=picture][data-state=none]`)),
		chromedp.SetUploadFiles(css(`[data-testid=source-form] input[type=file]`), []string{video}),
		chromedp.Click(css(`[data-testid=source-form] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=source-info]`)),
		chromedp.WaitVisible(css(`[data-testid=bed-form]`)),
		chromedp.SetUploadFiles(css(`[data-testid=bed-file]`), []string{bed}),
		chromedp.Click(css(`[data-testid=bed-form] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=bed-info]`)),
	))
	info, err := chromedp.Run(ctx, chromedp.Text(css(`[data-testid=bed-info]`)))
	require.NoError(t, err)
	require.Contains(t, info, "music and effects.wav")
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(`[data-testid=picture-video]`))))
	sound, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid=picture-sound]').value`))
	require.NoError(t, err)
	require.Equal(t, "bed", sound, "the dub over the bed by default")
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const v = document.querySelector('[data-testid=picture-video]');
		v.currentTime = 4.5; v.play(); return true })()`))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const a = document.querySelector('[data-testid=picture-dub]');
		return !a.paused && a.currentTime > 4.5 && a.getAttribute('src').includes('bed=1') })()`, chromedp.WithPollingTimeout(60*time.Second)))
	require.NoError(t, err, "the preview over the bed plays")
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.querySelector('[data-testid=picture-video]').pause(); return true })()`))
	require.NoError(t, err)

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/exports"), chromedp.WaitVisible(css(`[data-testid=export-form]`))))
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		document.querySelector('input[name=takes][value=done]').checked = true;
		document.querySelector('[data-testid=export-bed-mix]').checked = true;
		return true })()`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`[data-testid=start-export]`)),
		chromedp.WaitVisible(css(`[data-testid=export-row][data-state=done] [data-testid=download-export]`)),
	))
	format, err := chromedp.Run(ctx, chromedp.Text(css(`[data-testid=export-format]`)))
	require.NoError(t, err)
	require.Contains(t, format, "with a mix over the bed")
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
	require.NotNil(t, man.Bed)
	require.Contains(t, entries, "bed.wav")
	require.Contains(t, entries, "mix_over_bed.wav")
	require.Equal(t, "music and effects.wav", man.Bed.SourceFile)
	require.NotNil(t, man.Bed.Mix)
}
