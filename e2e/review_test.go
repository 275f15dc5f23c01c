package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"dubstudio/live"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/tts"
	"dubstudio/web"
	"dubstudio/workflow"
)

// reviewBundle is the app with a real worker (espeak-ng) behind it: renders and
// exports run as in production.
type reviewBundle struct {
	*testBundle
	pipeline *workflow.Pipeline
	project  *studio.Project
	lines    []studio.Line
}

func setupReview(t *testing.T) *reviewBundle {
	t.Helper()
	return setupReviewWith(t, nil)
}

// setupReviewWith is setupReview on a project of the given lines (nil: three lines
// of studiotest.Project), rendered.
func setupReviewWith(t *testing.T, lines []studio.NewLine) *reviewBundle {
	t.Helper()
	for _, tool := range []string{"espeak-ng", "ffmpeg"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	ctx := context.Background()
	store := studiotest.Store(t)
	dataDir := t.TempDir()
	cfg := appConfig(t, dataDir)
	logger := slog.New(slog.DiscardHandler)
	pipeline, err := workflow.NewPipeline(store, logger)
	require.NoError(t, err)
	w, err := workflow.NewWorker(pipeline, workflow.NewLocalPermits(tts.NewEspeak(tts.EspeakConfig{}), 2), workflow.WorkerConfig{
		Name: fmt.Sprintf("e2e-%d", time.Now().UnixNano()), DataDir: dataDir, FetchPollInterval: 100 * time.Millisecond,
		JobTimeout: 30 * time.Second, RescueAfter: time.Minute,
	}, logger)
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, w.Stop(c))
	})
	// Live updates from a real listener, as in the server: rows follow renders and
	// refits made elsewhere.
	broker, _ := startListener(t, store, live.ListenerConfig{})
	srv := web.New(web.Deps{Config: cfg, Store: store, Logger: logger, Renderer: pipeline, Exporter: pipeline, Proxies: pipeline, Live: broker})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.StopStreams)

	editor := studiotest.User(t, store, studio.RoleEditor)
	var project *studio.Project
	if lines == nil {
		project = studiotest.Project(t, store, editor, 3)
	} else {
		project = studiotest.Project(t, store, editor, 0)
		_, err = store.ImportLines(ctx, editor.ID, project.ID, lines)
		require.NoError(t, err)
	}
	_, err = pipeline.RenderPending(ctx, project.ID)
	require.NoError(t, err)
	b := &reviewBundle{testBundle: &testBundle{store: store, server: ts, editor: editor}, pipeline: pipeline, project: project}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b.lines, err = store.AllLines(ctx, project.ID)
		require.NoError(t, err)
		done := 0
		for _, l := range b.lines {
			if l.CurrentTakeID != nil && !l.State.Active() {
				done++
			}
		}
		if done == len(b.lines) {
			break
		}
		require.True(t, time.Now().Before(deadline), "lines still rendering")
		time.Sleep(100 * time.Millisecond)
	}
	return b
}

// audioBrowser is browser with autoplay allowed: headless Chromium otherwise refuses
// to play without a user gesture, and key events sent over DevTools count as none.
func audioBrowser(t *testing.T) context.Context {
	t.Helper()
	return launch(t, 3*time.Minute, chromedp.Flag("autoplay-policy", "no-user-gesture-required"))
}

// sourceVideo makes a short video with a sound track, as an editor would upload the
// programme being dubbed.
func sourceVideo(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "episode 7 (final).mp4")
	cmd := exec.Command("ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=160x90:rate=10:duration=8",
		"-f", "lavfi", "-i", "sine=frequency=330:sample_rate=44100:duration=8", "-shortest",
		"-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", "-y", out)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Skipf("ffmpeg cannot make a test video: %v: %s", err, b)
	}
	return out
}

// recordPlayers makes the page keep every media element whose play() is called, and
// the URL it played: one player plays every sound, from the URL its view gave it.
const recordPlayers = `(() => { if (window.players) return true; window.players = []; window.played = [];
	const play = HTMLMediaElement.prototype.play;
	HTMLMediaElement.prototype.play = function () {
		if (!window.players.includes(this)) window.players.push(this);
		window.played.push(this.src);
		return play.apply(this, arguments); };
	return true })()`

// moveAddress changes the page's address to one no URL of the app can be rebuilt
// from: the scripts must take their URLs from the page's elements.
const moveAddress = `(() => { history.replaceState(null, '', '/moved/elsewhere'); return true })()`

func (b *reviewBundle) line(t *testing.T, id int64) *studio.Line {
	t.Helper()
	l, err := b.store.Line(context.Background(), b.project.ID, id)
	require.NoError(t, err)
	return l
}

// TestReviewWithTheKeyboard renders a project with the espeak-ng worker, then works
// as an editor does, mostly from the keyboard: the help overlay, approving in the
// script table, the review view with its waveforms, the source video's original
// segment, approving and playing with A/B at the same position, a comment; then an
// export with its progress, and the download, which is a zip with a manifest. Every
// sound plays on the page's one player, and the scripts find their URLs in the page,
// not in its address.
func TestReviewWithTheKeyboard(t *testing.T) {
	b := setupReview(t)
	ctx := audioBrowser(t)
	video := sourceVideo(t)
	first, second := b.lines[0], b.lines[1]
	base := fmt.Sprintf("%s/projects/%d", b.server.URL, b.project.ID)

	require.NoError(t, chromedp.Do(ctx, login(b.testBundle, b.editor)...))

	// The script table: ? shows the shortcuts, Esc hides them; j moves to a line, a
	// approves its take (at the URL the row gives, whatever the page's address).
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base),
		chromedp.WaitVisible(css(`[data-testid=lines]`)),
	))
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](moveAddress))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.KeyEvent("?"),
		chromedp.WaitVisible(css(`[data-testid=kb-help]`)),
	))
	screenshot(t, ctx, "shortcuts.png")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.KeyEvent(kb.Escape),
		chromedp.WaitNotVisible(css(`[data-testid=kb-help]`)),
		chromedp.KeyEvent("jj"),
		chromedp.WaitVisible(css(fmt.Sprintf(`#line-%d.kb-focus`, second.ID))),
		chromedp.KeyEvent("a"),
		chromedp.WaitVisible(css(fmt.Sprintf(`#line-%d.kb-focus .approved`, second.ID))),
	))
	require.Equal(t, *second.CurrentTakeID, *b.line(t, second.ID).ApprovedTakeID, "a approved the focused line's take")

	// A key typed into a field is text, not a shortcut.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`input[name=q]`)),
		chromedp.KeyEvent("ja"),
	))
	typed, err := chromedp.Run(ctx, chromedp.Value(css(`input[name=q]`)))
	require.NoError(t, err)
	require.Equal(t, "ja", typed)
	focusedRows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('tr.kb-focus').length`))
	require.NoError(t, err)
	require.LessOrEqual(t, focusedRows, 1)

	// The review view: a waveform per take, the slot and the timecodes.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/review?line=%d", base, first.ID)),
		chromedp.WaitVisible(css(`#review-panel article.take[data-take-id][data-ready=true]`)),
	))
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](recordPlayers))
	require.NoError(t, err)
	tc, err := chromedp.Run(ctx, chromedp.Text(css(`[data-testid=review-timecodes]`)))
	require.NoError(t, err)
	require.Contains(t, tc, "00:00:00.000 → 00:00:01.500")
	regions, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(() => {
		const w = document.querySelector('#review-panel article.take[data-take-id] [data-wave] div');
		return w && w.shadowRoot ? w.shadowRoot.querySelectorAll('[part~="region"]').length : -1 })()`))
	require.NoError(t, err)
	require.GreaterOrEqual(t, regions, 2, "the slot and the speech are drawn over the waveform")

	// The original performance: a video uploaded, its sound track kept, the line's
	// segment drawn beside its take.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SetUploadFiles(css(`[data-testid=source-form] input[type=file]`), []string{video}),
		chromedp.Click(css(`[data-testid=source-form] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=source-info]`)),
		chromedp.WaitVisible(css(`#review-panel [data-testid=review-original][data-ready=true]`)),
	))
	info, err := chromedp.Run(ctx, chromedp.Text(css(`[data-testid=source-info]`)))
	require.NoError(t, err)
	require.Contains(t, info, "episode 7 (final).mp4", "the file name is shown, never used as a path")

	// a approves the take that plays (A), from the keyboard.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.KeyEvent("a"),
		chromedp.WaitVisible(css(`#review-panel article.take.ab-a [data-testid=review-approved]`)),
		chromedp.WaitVisible(css(`#review-panel article.take.ab-a[data-ready=true]`)),
	))
	require.Equal(t, *first.CurrentTakeID, *b.line(t, first.ID).ApprovedTakeID)
	hist, err := chromedp.Run(ctx, chromedp.Text(css(`[data-testid=review-history]`)))
	require.NoError(t, err)
	require.Contains(t, hist, "approved take 1")

	// Space plays it; b hands over to the original at the same position.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.KeyEvent(" "),
		chromedp.WaitVisible(css(`#review-panel article.take.ab-a[data-take-id][data-playing=take]`)),
	))
	at, err := chromedp.Run(ctx, chromedp.Poll[float64](`(() => {
		const t = document.querySelector('#review-panel article.take.ab-a').__ws.getCurrentTime();
		return t > 0.3 ? t : 0 })()`, chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "the take's playback advances")
	screenshot(t, ctx, "review-playing.png")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.KeyEvent("b"),
		chromedp.WaitVisible(css(`#review-panel article.take.ab-a[data-kind=original][data-playing=original]`)),
	))
	switched, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.querySelector('#review-panel article.take.ab-a').__ws.getCurrentTime()`))
	require.NoError(t, err)
	require.GreaterOrEqual(t, switched, at, "B starts where A was, not from the beginning")
	stillPlaying, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#review-panel article.take[data-playing]').length`))
	require.NoError(t, err)
	require.Equal(t, 1, stillPlaying, "only one take plays at a time")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.KeyEvent(kb.Escape),
		chromedp.WaitNotPresent(css(`#review-panel article.take[data-playing]`)),
	))

	// Play on one take stops the other, and the line's ▶ stops both: one player plays
	// them all. What is left of a sound can be short: a recorder keeps every mark.
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { window.marks = [];
		new MutationObserver(rs => rs.forEach(r => { const el = r.target;
			window.marks.push((el.matches('tr.line') ? 'line' : el.dataset.kind || 'take') + '=' + (el.getAttribute('data-playing') || '')); }))
		.observe(document.getElementById('live'), {subtree: true, attributes: true, attributeFilter: ['data-playing']});
		return true })()`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(`#review-panel article.take[data-kind=original] [data-action=play]`))))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.marks.includes('original=original')`, chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "the original plays")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(`#review-panel article.take[data-take-id] [data-testid=review-play]`))))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.marks.includes('take=take') && window.marks.includes('original=')`, chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "the take plays, the original stopped")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(`#review-panel tr.line button[data-play-url]`))))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`window.marks.includes('line=take')`, chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "the line's ▶ plays its take")
	cardsPlaying, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#review-panel article.take[data-playing]').length`))
	require.NoError(t, err)
	require.Equal(t, 0, cardsPlaying, "the line's ▶ stops the takes")
	players, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.players.length`))
	require.NoError(t, err)
	require.Equal(t, 1, players, "the takes, the original and the line's ▶ play on one media element")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.KeyEvent(kb.Escape),
		chromedp.WaitNotPresent(css(`#review-panel [data-playing]`)),
	))

	// A comment on the take, kept with who wrote it.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(css(`#review-panel article.take[data-take-id] [data-testid=comment-form] textarea`), "Breathe before <the> last word & slow down."),
		chromedp.Click(css(`#review-panel article.take[data-take-id] [data-testid=comment-form] button[type=submit]`)),
		chromedp.WaitVisible(css(`#review-panel [data-testid=review-comment]`)),
	))
	comment, err := chromedp.Run(ctx, chromedp.Text(css(`#review-panel [data-testid=review-comment]`)))
	require.NoError(t, err)
	require.Contains(t, comment, "Breathe before <the> last word & slow down.")
	require.Contains(t, comment, b.editor.Name())
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(`#review-panel [data-ready=true]`))))
	screenshot(t, ctx, "review.png")

	// j goes to the next line, without reloading the page.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.KeyEvent("j"),
		chromedp.WaitVisible(css(fmt.Sprintf(`#review-panel[data-line-id="%d"]`, second.ID))),
	))

	// The line with the ones around it, as they will sound on the timeline.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`[data-testid=play-context]`)),
		chromedp.WaitVisible(css(`[data-testid=range-audio]`)),
	))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const a = document.querySelector('[data-testid=range-audio]');
		return !a.paused && a.currentTime > 0.2 })()`, chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "the range plays")
	rangeLen, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.querySelector('[data-testid=range-audio]').duration`))
	require.NoError(t, err)
	require.InDelta(t, 5.6, rangeLen, 0.25, "lines 1 to 3: from 0 s to the end of line 3's take")

	// espeak-ng would make the same take again: regenerate is off, saying why. Once
	// the character's voice changes, r asks for a new take; the panel follows the
	// render and shows it when done, while the approved take stays approved.
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(`[data-testid=regenerate-same]`))))
	same, err := chromedp.Run(ctx, chromedp.Text(css(`[data-testid=regenerate-same]`)))
	require.NoError(t, err)
	require.Contains(t, same, "espeak gives the same audio")
	bob, err := b.store.Character(context.Background(), b.project.ID, *second.CharacterID)
	require.NoError(t, err)
	require.NoError(t, b.store.UpdateCharacter(context.Background(), b.project.ID, bob.ID,
		studio.CharacterParams{Name: bob.Name, Color: bob.Color, Emotion: bob.Emotion, PreviewVoice: "en-gb-x-rp"}))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Reload(),
		chromedp.WaitVisible(css(`#review-panel article.take[data-take-id][data-ready=true]`)),
		chromedp.WaitNotPresent(css(`[data-testid=regenerate-same]`)),
		chromedp.KeyEvent("r"),
		chromedp.WaitVisible(css(`[data-testid=review-rendering]`)),
	))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll('#review-panel [data-testid=review-take]').length === 2 &&
		!document.querySelector('[data-testid=review-rendering]')`, chromedp.WithPollingTimeout(60*time.Second)))
	require.NoError(t, err, "the new take appears")
	hist, err = chromedp.Run(ctx, chromedp.Text(css(`[data-testid=review-history]`)))
	require.NoError(t, err)
	require.Contains(t, hist, "asked for a new take")
	regenerated := b.line(t, second.ID)
	require.NotEqual(t, *second.CurrentTakeID, *regenerated.CurrentTakeID)
	require.Equal(t, *second.CurrentTakeID, *regenerated.ApprovedTakeID)

	// In the script, space plays the focused line's take and b switches to its
	// original at the same position, from the URLs the row gives, whatever the page's
	// address. Each lasts as long as the line (1.5 s), which a loaded machine's browser
	// can let pass between two looks: a recorder keeps every state each row shows.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base),
		chromedp.WaitVisible(css(`[data-testid=lines]`)),
	))
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](moveAddress))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](recordPlayers))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { window.rowSeen = [];
		new MutationObserver((changes) => { for (const c of changes) { const v = c.target.getAttribute('data-playing');
				if (v && c.target.id) window.rowSeen.push(c.target.id + ':' + v); } })
		.observe(document.body, {subtree: true, attributes: true, attributeFilter: ['data-playing']});
		return true })()`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.KeyEvent("j"), chromedp.KeyEvent(" ")))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`window.rowSeen.includes('line-%d:take')`, first.ID),
		chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "space plays the take")
	require.NoError(t, chromedp.Do(ctx, chromedp.KeyEvent("b")))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`window.rowSeen.includes('line-%d:original')`, first.ID),
		chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "b plays the original")
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`window.played.some(u => u.endsWith('/projects/%d/lines/%d/source.wav'))`, b.project.ID, first.ID),
		chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "the original is played from the row's URL")
	// The mouse's ▶ on another line stops the keyboard's: the same player. Its take, too,
	// can end between two looks: the recorder saw it play. chromedp types a key as a
	// keydown and a separate char event: the page cancels the keydown of space, but the
	// char's keypress still scrolls the page down (a real keyboard's does not come once
	// its keydown is cancelled), and a click aimed while the page scrolls lands beside
	// the button: wait for the page to stand still.
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const y = window.scrollY, still = window.lastScrollY === y;
		window.lastScrollY = y; return still })()`, chromedp.WithPollingInterval(100*time.Millisecond),
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(fmt.Sprintf(`#line-%d button[data-play-url]`, second.ID)))))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`window.rowSeen.includes('line-%d:take')`, second.ID),
		chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "the mouse's ▶ plays the other line's take")
	firstStopped, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`!document.querySelector('#line-%d[data-playing]')`, first.ID)))
	require.NoError(t, err)
	require.True(t, firstStopped, "one line plays at a time")
	players, err = chromedp.Run(ctx, chromedp.Evaluate[int](`window.players.length`))
	require.NoError(t, err)
	require.Equal(t, 1, players, "the keys and the ▶ buttons play on one media element")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.KeyEvent(kb.Escape),
		chromedp.WaitNotPresent(css(`tr.line[data-playing]`)),
	))

	// Export the approved takes: the progress runs to the end, then the download.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/exports"),
		chromedp.WaitVisible(css(`[data-testid=export-form]`)),
		chromedp.Click(css(`[data-testid=start-export]`)),
		chromedp.WaitVisible(css(`[data-testid=export-row][data-state=done] [data-testid=download-export]`)),
	))
	screenshot(t, ctx, "export.png")
	b64, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.querySelector('[data-testid=download-export]').href)
		.then(r => { if (!r.ok) throw new Error(r.status); return r.arrayBuffer(); })
		.then(buf => { const u = new Uint8Array(buf); let s = ''; for (let i = 0; i < u.length; i += 8192) s += String.fromCharCode.apply(null, u.subarray(i, i + 8192)); return btoa(s); })`,
		chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	data, err := base64.StdEncoding.DecodeString(b64)
	require.NoError(t, err)
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err, "the download is a zip")
	var man workflow.Manifest
	for _, f := range zr.File {
		if f.Name == "manifest.json" {
			r, err := f.Open()
			require.NoError(t, err)
			require.NoError(t, json.NewDecoder(r).Decode(&man))
			r.Close()
		}
	}
	require.Len(t, man.Lines, 2, "the two approved lines")
	require.Equal(t, *first.CurrentTakeID, man.Lines[0].TakeID)
	require.Equal(t, *second.CurrentTakeID, man.Lines[1].TakeID)
	require.Equal(t, 48000, man.SampleRate)

	// Every word of the review view comes from the catalog: in Simplified Chinese too
	// (checked as text: this machine's Chromium has no CJK font to screenshot it).
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const s = document.querySelector('[data-testid=lang-select]');
		s.value = 'zh'; s.form.submit(); return true })()`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(css(`html[lang=zh]`)),
		chromedp.Navigate(fmt.Sprintf("%s/review?line=%d", base, first.ID)),
		chromedp.WaitVisible(css(`#review-panel article.take[data-take-id][data-ready=true]`)),
		chromedp.KeyEvent("?"),
		chromedp.WaitVisible(css(`[data-testid=kb-help]`)),
	))
	zh, err := chromedp.Run(ctx, chromedp.Text(css(`body`)))
	require.NoError(t, err)
	for _, want := range []string{"审听", "原始表演", "第 1 句，共 3 句", "键盘快捷键", "审听记录"} {
		require.Contains(t, zh, want)
	}
	fmt.Println("screenshots: e2e/artifacts/shortcuts.png review-playing.png review.png export.png")
}
