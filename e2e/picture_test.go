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

// syncSample is one reading of the picture's clock and the dub's, in one task, Ms
// after the picture started playing.
type syncSample struct {
	Ms          float64 `json:"ms"`
	Video       float64 `json:"video"`
	Dub         float64 `json:"dub"`
	VideoPaused bool    `json:"videoPaused"`
	DubPaused   bool    `json:"dubPaused"`
	VideoMuted  bool    `json:"videoMuted"`
}

// playAndRead seeks the picture to its argument (a negative one: no seek, a plain
// play from where it stands) and plays it as a user would, then reads the two
// clocks from the first 'playing' event at which the picture really plays (the
// page may pause it again to start the dub with it), and every 50 ms after, for
// 0.6 s: the page's own start-up is inside the window, not before it.
const playAndRead = `(async (at) => {
	const v = document.querySelector('[data-testid=picture-video]'), a = document.querySelector('[data-testid=picture-dub]');
	v.pause(); await new Promise(r => setTimeout(r, 300));
	const read = (t0) => ({ms: performance.now() - t0, video: v.currentTime, dub: a.currentTime,
		videoPaused: v.paused, dubPaused: a.paused, videoMuted: v.muted});
	const out = [];
	const playing = new Promise((resolve) => {
		const on = () => { if (v.paused) return; out.push(read(performance.now())); v.removeEventListener('playing', on); resolve(); };
		v.addEventListener('playing', on);
		setTimeout(resolve, 30000);
	});
	if (at >= 0) v.currentTime = at;
	v.play();
	await playing;
	if (!out.length) return out;
	const t0 = performance.now();
	while (performance.now() - t0 < 600) {
		await new Promise(r => setTimeout(r, 50));
		out.push(read(t0));
	}
	return out;
})(%f)`

// TestPictureWithTheDubInSync uploads a short video (ffmpeg's test picture with
// espeak-ng speech) to a rendered project, waits for its proxy, then plays the
// picture with the dub from 0 and from several seek points and reads the dub
// element's position against the video's currentTime from the moment the picture
// starts: every reading within one frame at 25 fps (40 ms).
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
	// Its box has the source's shape before the proxy loads: the script below it does
	// not move under the pointer when the picture arrives.
	reserved, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const v = document.querySelector('[data-testid=picture-video]');
		const w = +v.getAttribute('width'), h = +v.getAttribute('height'), r = v.getBoundingClientRect();
		return w > 0 && h > 0 && Math.abs(r.height - r.width * h / w) < 2 })()`))
	require.NoError(t, err)
	require.True(t, reserved, "the player's box is the source's shape from the start")
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](moveAddress))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('[data-testid=picture-video]').readyState >= 2`,
		chromedp.WithPollingTimeout(30*time.Second)))
	require.NoError(t, err, "the browser plays the proxy")

	// First a plain play from 0 (the page just opened), then seeks back and forth.
	var late []string // readings more than a frame (40 ms at 25 fps) apart
	for _, at := range []float64{-1, 0.4, 2.25, 4.1, 1.0, 6.5, 3.33, 0} {
		samples, err := chromedp.Run(ctx, chromedp.Evaluate[[]syncSample](fmt.Sprintf(playAndRead, at), chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		require.NotEmpty(t, samples, "the picture plays from %.2f s", at)
		drifts := make([]int, len(samples))
		for i, s := range samples {
			drifts[i] = int(math.Round((s.Dub - s.Video) * 1000))
		}
		t.Logf("seek %.2f s: dub minus picture (ms) from the picture's start, every 50 ms: %v", at, drifts)
		worst := samples[0]
		for _, s := range samples {
			require.False(t, s.VideoPaused || s.DubPaused, "seek %.2f s, %.0f ms in: both play (%+v)", at, s.Ms, s)
			require.True(t, s.VideoMuted, "the picture is silent while the dub plays")
			// A seek lands on the frame time as a float: 4.1 may read back as 4.099999.
			require.GreaterOrEqual(t, s.Video, at-0.001, "the picture plays on from the seek")
			if math.Abs(s.Dub-s.Video) > math.Abs(worst.Dub-worst.Video) {
				worst = s
			}
		}
		// Every seek is measured (and logged) before the test fails.
		if math.Abs(worst.Dub-worst.Video) > 0.040 {
			late = append(late, fmt.Sprintf("seek %.2f s, %.0f ms after the picture started: dub at %.3f s, picture at %.3f s",
				at, worst.Ms, worst.Dub, worst.Video))
		}
		require.Greater(t, samples[len(samples)-1].Video, samples[0].Video+0.4, "the picture plays on")
		// The page says so once the drift has stayed small.
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('[data-picture]').getAttribute('data-synced') === 'true'`,
			chromedp.WithPollingTimeout(10*time.Second)))
		require.NoError(t, err, "the page says in sync after the seek to %.2f s", at)
		_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.querySelector('[data-testid=picture-video]').pause(); return true })()`))
		require.NoError(t, err)
	}
	require.Empty(t, late, "the dub within a frame of the picture from its start")
	screenshot(t, ctx, "review-picture.png")

	// The original sound: the picture's own track plays, the dub stops.
	require.NoError(t, chromedp.Do(ctx, chromedp.SetValue(css(`[data-testid=picture-sound]`), "original")))
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const s = document.querySelector('[data-testid=picture-sound]');
		s.dispatchEvent(new Event('change')); document.querySelector('[data-testid=picture-video]').play(); return true })()`))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const v = document.querySelector('[data-testid=picture-video]');
		return !v.paused && !v.muted && document.querySelector('[data-testid=picture-dub]').paused
			&& v.getAttribute('src') === document.querySelector('[data-picture]').getAttribute('data-original-url') })()`, chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "original: the proxy with its sound, no dub")

	// Back to the dub: the picture without its sound again, in sync from its start.
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const s = document.querySelector('[data-testid=picture-sound]'), v = document.querySelector('[data-testid=picture-video]');
		v.pause(); s.value = 'dub'; s.dispatchEvent(new Event('change')); return true })()`))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const v = document.querySelector('[data-testid=picture-video]');
		return v.readyState >= 2 && v.getAttribute('src') === document.querySelector('[data-picture]').getAttribute('data-picture-url') })()`, chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "dub: the picture without its sound")
	samples, err := chromedp.Run(ctx, chromedp.Evaluate[[]syncSample](fmt.Sprintf(playAndRead, 5.2), chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	require.NotEmpty(t, samples)
	for _, s := range samples {
		require.False(t, s.VideoPaused || s.DubPaused, "%+v", s)
		require.LessOrEqual(t, math.Abs(s.Dub-s.Video), 0.040, "after switching back, %.0f ms in: dub at %.3f s, picture at %.3f s", s.Ms, s.Dub, s.Video)
	}
}
