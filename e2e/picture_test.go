package e2e

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"dubstudio/media/mediatest"
)

// syncSample is one reading of the picture's clock and the dub's, in one task.
type syncSample struct {
	Video       float64 `json:"video"`
	Dub         float64 `json:"dub"`
	VideoPaused bool    `json:"videoPaused"`
	DubPaused   bool    `json:"dubPaused"`
	VideoMuted  bool    `json:"videoMuted"`
}

const readSync = `(() => { const v = document.querySelector('[data-testid=picture-video]'),
	a = document.querySelector('[data-testid=picture-dub]');
	return {video: v.currentTime, dub: a.currentTime, videoPaused: v.paused, dubPaused: a.paused, videoMuted: v.muted} })()`

// TestPictureWithTheDubInSync uploads a short video (ffmpeg's test picture with
// espeak-ng speech) to a rendered project, waits for its proxy, then plays the
// picture with the dub from several seek points and reads the dub element's
// position against the video's currentTime: within one frame at 25 fps (40 ms).
func TestPictureWithTheDubInSync(t *testing.T) {
	b := setupReview(t)
	ctx := audioBrowser(t)
	video := mediatest.Video(t, t.TempDir(), "scene 12.mp4", 8, "Where were you last night? Out walking, like I said. In the rain?")
	base := fmt.Sprintf("%s/projects/%d", b.server.URL, b.project.ID)

	require.NoError(t, chromedp.Do(ctx, login(b.testBundle, b.editor)...))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/review"),
		chromedp.WaitVisible(css(`[data-testid=picture][data-state=none]`)),
		chromedp.SetUploadFiles(css(`[data-testid=source-form] input[type=file]`), []string{video}),
		chromedp.Click(css(`[data-testid=source-form] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=source-info]`)),
	))
	// The proxy is made by the worker; the card shows its progress, then the player.
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(`[data-testid=picture-video]`))))
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](moveAddress))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('[data-testid=picture-video]').readyState >= 2`,
		chromedp.WithPollingTimeout(30*time.Second)))
	require.NoError(t, err, "the browser plays the proxy")

	for _, at := range []float64{0.4, 2.25, 4.1, 1.0, 6.5, 3.33} {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const v = document.querySelector('[data-testid=picture-video]');
			v.currentTime = %f; v.play(); return true })()`, at)))
		require.NoError(t, err)
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const v = document.querySelector('[data-testid=picture-video]'),
			a = document.querySelector('[data-testid=picture-dub]');
			return !v.paused && !a.paused && !v.seeking && !a.seeking })()`, chromedp.WithPollingTimeout(30*time.Second)))
		require.NoError(t, err, "picture and dub play from %.2f s", at)
		// The dub's rate catches up the offset of its start, then the page says so.
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('[data-picture]').getAttribute('data-synced') === 'true'`,
			chromedp.WithPollingTimeout(10*time.Second)))
		drifts, _ := chromedp.Run(ctx, chromedp.Evaluate[[]int](`(document.querySelector('[data-picture]').__drifts || []).splice(0)`))
		t.Logf("seek %.2f s: drift (ms) from the start %v", at, drifts)
		require.NoError(t, err, "in sync after the seek to %.2f s", at)
		for range 5 {
			s, err := chromedp.Run(ctx, chromedp.Evaluate[syncSample](readSync))
			require.NoError(t, err)
			require.False(t, s.VideoPaused || s.DubPaused, "both still play (%+v)", s)
			require.True(t, s.VideoMuted, "the picture is silent while the dub plays")
			require.Greater(t, s.Video, at, "the picture plays on from the seek")
			require.LessOrEqual(t, math.Abs(s.Dub-s.Video), 0.040, "seek %.2f s: dub at %.3f s, picture at %.3f s", at, s.Dub, s.Video)
			time.Sleep(120 * time.Millisecond)
		}
		_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.querySelector('[data-testid=picture-video]').pause(); return true })()`))
		require.NoError(t, err)
	}
	screenshot(t, ctx, "review-picture.png")

	// The original sound: the picture's own track plays, the dub stops.
	require.NoError(t, chromedp.Do(ctx, chromedp.SetValue(css(`[data-testid=picture-sound]`), "original")))
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const s = document.querySelector('[data-testid=picture-sound]');
		s.dispatchEvent(new Event('change')); document.querySelector('[data-testid=picture-video]').play(); return true })()`))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const v = document.querySelector('[data-testid=picture-video]');
		return !v.paused && !v.muted && document.querySelector('[data-testid=picture-dub]').paused })()`, chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "original: the video's sound, no dub")
}
