package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"dubstudio/media/mediatest"
	"dubstudio/studio"
)

// editorWithPicture is a rendered project (three lines: Alice, Bob, Alice) with a
// short video uploaded and its proxy made, open in the script editor.
func editorWithPicture(t *testing.T) (*reviewBundle, context.Context, string) {
	t.Helper()
	return editorWithVideo(t, mediatest.Video(t, t.TempDir(), "scene 12.mp4", 8, "Where were you last night? Out walking, like I said. In the rain?"))
}

// editorWithVideo is editorWithPicture with the video at path.
func editorWithVideo(t *testing.T, video string) (*reviewBundle, context.Context, string) {
	t.Helper()
	b := setupReview(t)
	ctx := audioBrowser(t)
	base := fmt.Sprintf("%s/projects/%d", b.server.URL, b.project.ID)
	require.NoError(t, chromedp.Do(ctx, login(b.testBundle, b.editor)...))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/review"),
		chromedp.WaitVisible(css(`[data-testid=picture][data-state=none]`)),
		chromedp.SetUploadFiles(css(`[data-testid=source-form] input[type=file]`), []string{video}),
		chromedp.Click(css(`[data-testid=source-form] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=picture-video]`)),
		chromedp.Navigate(base),
		chromedp.WaitVisible(css(`[data-testid=picture-video]`)),
		chromedp.WaitVisible(css(`[data-timeline][data-ready=true]`)),
	))
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](moveAddress))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('[data-testid=picture-video]').readyState >= 2`,
		chromedp.WithPollingTimeout(30*time.Second)))
	require.NoError(t, err, "the editor plays the proxy")
	return b, ctx, base
}

// rect is an element's box in the viewport.
type rect struct {
	Left, Right, Top, Bottom float64
}

func clipRect(t *testing.T, ctx context.Context, lineID int64) rect {
	t.Helper()
	r, err := chromedp.Run(ctx, chromedp.Evaluate[rect](fmt.Sprintf(`(() => { const r = document.getElementById('clip-%d').getBoundingClientRect();
		return {left: r.left, right: r.right, top: r.top, bottom: r.bottom} })()`, lineID)))
	require.NoError(t, err)
	return r
}

// drag presses the mouse at (x, y), moves it to x+dx in steps and lets go.
func drag(x, y, dx float64) []chromedp.Action[chromedp.Void] {
	held := func(p *input.DispatchMouseEventParams) { p.Button = input.MouseButtonLeft; p.Buttons = 1 }
	acts := []chromedp.Action[chromedp.Void]{chromedp.MouseEvent(chromedp.MousePressed, x, y, held, func(p *input.DispatchMouseEventParams) { p.ClickCount = 1 })}
	for i := 1; i <= 8; i++ {
		acts = append(acts, chromedp.MouseEvent(chromedp.MouseMoved, x+dx*float64(i)/8, y, held))
	}
	return append(acts, chromedp.MouseEvent(chromedp.MouseReleased, x+dx, y, held, func(p *input.DispatchMouseEventParams) { p.ClickCount = 1 }))
}

// waitSlot waits until the line's slot in the database is (start, end).
func (b *reviewBundle) waitSlot(t *testing.T, id int64, start, end int) *studio.Line {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		l := b.line(t, id)
		if l.StartMs == start && l.EndMs == end {
			return l
		}
		require.True(t, time.Now().Before(deadline), "line %d is at %d-%d, want %d-%d", id, l.StartMs, l.EndMs, start, end)
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTimelineNudgesByAFrameOfThePicture uploads a 29.97 fps video (30000/1001,
// NTSC): the frame rate probed at the upload makes Alt+Right and Alt+Shift+Right move
// the selected clip by one frame of it, 33 ms (TestTimelineUnderThePicture's 25 fps
// video: 40 ms).
func TestTimelineNudgesByAFrameOfThePicture(t *testing.T) {
	video := mediatest.VideoAt(t, t.TempDir(), "ntsc.mp4", 8, "320x240", "30000/1001", "Where were you last night? Out walking, like I said.")
	b, ctx, _ := editorWithVideo(t, video)
	alice1 := b.lines[0]
	frame, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-timeline]').getAttribute('data-frame-ms')`))
	require.NoError(t, err)
	require.Equal(t, "33", frame)

	r := clipRect(t, ctx, alice1.ID)
	require.NoError(t, chromedp.Do(ctx, chromedp.MouseClickXY((r.Left+r.Right)/2, (r.Top+r.Bottom)/2)))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`document.getElementById('clip-%d').classList.contains('selected')`, alice1.ID),
		chromedp.WithPollingTimeout(5*time.Second)))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowRight, chromedp.KeyModifiers(chromedp.ModifierAlt))))
	moved := b.waitSlot(t, alice1.ID, alice1.StartMs+33, alice1.EndMs+33)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`document.getElementById('clip-%d').getAttribute('data-start') === '%d'`, alice1.ID, moved.StartMs),
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "the clip shows the saved slot")
	require.NoError(t, chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowRight, chromedp.KeyModifiers(chromedp.ModifierAlt|chromedp.ModifierShift))))
	b.waitSlot(t, alice1.ID, alice1.StartMs+33, alice1.EndMs+66)
}

// TestTimelineUnderThePicture opens the editor of a rendered project with a video:
// the timeline draws a track per character with each line's clip, a click selects
// the line in the script, dragging an edge changes the slot in the database and
// queues the line again (a new take follows), an edge snaps to a neighbour's (whose
// take, running into the new start, is fitted again, and its row follows live), and
// Alt+Right nudges the selected clip by a frame.
func TestTimelineUnderThePicture(t *testing.T) {
	b, ctx, _ := editorWithPicture(t)
	alice1, bob, alice3 := b.lines[0], b.lines[1], b.lines[2]

	perTrack, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`Array.from(document.querySelectorAll('[data-testid=timeline-track]')).map(t => t.querySelectorAll('[data-clip]').length)`))
	require.NoError(t, err)
	require.Equal(t, []int{2, 1}, perTrack, "Alice's two lines, Bob's one")
	waves, err := chromedp.Run(ctx, chromedp.Evaluate[int](`Array.from(document.querySelectorAll('[data-clip] canvas')).filter(c => c.width > 0 && c.getContext('2d').getImageData(0, 0, c.width, c.height).data.some((v, i) => i % 4 === 3 && v > 0)).length`))
	require.NoError(t, err)
	require.Equal(t, 3, waves, "every clip draws its take's waveform")

	// The playhead follows the picture.
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.querySelector('[data-testid=picture-video]').currentTime = 3; return true })()`))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const tl = document.querySelector('[data-timeline]'), ph = tl.querySelector('[data-tl-playhead]');
		return Math.abs(parseFloat(ph.style.left) - 3 * Number(tl.getAttribute('data-pps'))) < 1 })()`, chromedp.WithPollingTimeout(5*time.Second)))
	require.NoError(t, err, "the playhead is at the picture's 3 s")
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.querySelector('[data-testid=picture-video]').currentTime = 0; window.__noReload = 7; return true })()`))
	require.NoError(t, err)

	// A click on Bob's clip selects his line in the script.
	r := clipRect(t, ctx, bob.ID)
	require.NoError(t, chromedp.Do(ctx, chromedp.MouseClickXY((r.Left+r.Right)/2, (r.Top+r.Bottom)/2)))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`document.getElementById('line-%d').classList.contains('kb-focus') && document.getElementById('clip-%d').classList.contains('selected')`, bob.ID, bob.ID),
		chromedp.WithPollingTimeout(5*time.Second)))
	require.NoError(t, err, "the clicked clip's line is the script's focused line")
	require.Equal(t, bob.StartMs, b.line(t, bob.ID).StartMs, "a click moves nothing")

	// Dragging the end edge 300 ms later: the slot changes in the database, the line
	// is queued again and gets a new take for its new slot.
	pps, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`Number(document.querySelector('[data-timeline]').getAttribute('data-pps'))`))
	require.NoError(t, err)
	dx := math.Round(0.3 * pps)
	wantEnd := bob.EndMs + int(math.Round(dx/pps*1000))
	require.NoError(t, chromedp.Do(ctx, drag(r.Right-2, (r.Top+r.Bottom)/2, dx)...))
	moved := b.waitSlot(t, bob.ID, bob.StartMs, wantEnd)
	require.Equal(t, bob.Revision+1, moved.Revision)
	deadline := time.Now().Add(time.Minute)
	for {
		l := b.line(t, bob.ID)
		if l.RenderSeq > bob.RenderSeq && l.CurrentTakeID != nil && *l.CurrentTakeID != *bob.CurrentTakeID && !l.State.Active() {
			break
		}
		require.True(t, time.Now().Before(deadline), "no new take (line %s)", l.State)
		time.Sleep(100 * time.Millisecond)
	}
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`document.querySelector('#line-%d [data-testid=line-text]') && document.getElementById('line-%d').textContent.includes('00:00:03.%03d')`, bob.ID, bob.ID, wantEnd%1000),
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "the script's row shows the new end")

	// The start edge dragged to 20 ms short of Alice's first line's end snaps onto it.
	require.NoError(t, chromedp.Do(ctx, chromedp.Sleep(1500*time.Millisecond))) // the live reload after the new take
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('[data-timeline][data-ready=true]') !== null`, chromedp.WithPollingTimeout(5*time.Second)))
	require.NoError(t, err)
	r = clipRect(t, ctx, bob.ID)
	dx = -math.Round(float64(bob.StartMs-alice1.EndMs-20) / 1000 * pps)
	require.NoError(t, chromedp.Do(ctx, drag(r.Left+2, (r.Top+r.Bottom)/2, dx)...))
	b.waitSlot(t, bob.ID, alice1.EndMs, wantEnd)
	// Alice's first take ran into the gap that Bob's line now starts in: it is fitted
	// again from its raw audio, with no new synthesis, and her row shows the new take.
	deadline = time.Now().Add(30 * time.Second)
	for {
		l := b.line(t, alice1.ID)
		if l.CurrentTakeID != nil && *l.CurrentTakeID != *alice1.CurrentTakeID && !l.State.Active() {
			tk, err := b.store.Take(context.Background(), b.project.ID, *l.CurrentTakeID)
			require.NoError(t, err)
			require.NotNil(t, tk.RefitOf, "fitted again, not synthesized")
			require.Equal(t, *alice1.CurrentTakeID, *tk.RefitOf)
			require.Zero(t, tk.BorrowedMs, "Bob's line starts where hers ends")
			break
		}
		require.True(t, time.Now().Before(deadline), "Alice's first line was not fitted again (%s)", l.State)
		time.Sleep(100 * time.Millisecond)
	}
	old, err := b.store.Take(context.Background(), b.project.ID, *alice1.CurrentTakeID)
	require.NoError(t, err)
	require.Positive(t, old.BorrowedMs)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`!document.getElementById('line-%d').textContent.includes('with %d ms borrowed')`, alice1.ID, old.BorrowedMs),
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "her row shows the new take, live")

	// Alt+Right twice: the selected clip moves two frames (80 ms), sent once.
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`(() => { const c = document.getElementById('clip-%d'); return c && c.getAttribute('data-start') === '%d' })()`, bob.ID, alice1.EndMs),
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err)
	before := b.line(t, bob.ID)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.KeyEvent(kb.ArrowRight, chromedp.KeyModifiers(chromedp.ModifierAlt)),
		chromedp.KeyEvent(kb.ArrowRight, chromedp.KeyModifiers(chromedp.ModifierAlt)),
	))
	nudged := b.waitSlot(t, bob.ID, alice1.EndMs+80, wantEnd+80)
	require.Equal(t, before.Revision+1, nudged.Revision, "two nudges in a row are one change")
	marker, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.__noReload || 0`))
	require.NoError(t, err)
	require.Equal(t, 7, marker, "Alt+Left/Right do not leave the page")
	require.Equal(t, alice3.StartMs, b.line(t, alice3.ID).StartMs, "the other lines stay")
	// The nudge ran Bob's own tail into Alice's next line: fitted again, and his row
	// and the progress end done.
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`(() => { const r = document.getElementById('line-%d');
		return r && r.classList.contains('st-row-done') })()`, bob.ID), chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil {
		l := b.line(t, bob.ID)
		row, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.getElementById('line-%d').className`, bob.ID)))
		t.Fatalf("Bob's row did not end done: %q, the line %s (seq %d)", row, l.State, l.RenderSeq)
	}
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const p = document.querySelector('#project-progress .progress-legend');
		return p && p.querySelectorAll('.badge').length === 1 && p.querySelector('.badge.st-done') !== null })()`, chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil {
		legend, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#project-progress .progress-legend').textContent`))
		t.Fatalf("the progress did not end all done: %q", legend)
	}

	shot(t, ctx, "editor-timeline.png", `main`)

	// A stale clip (someone else saved the line meanwhile) gets the conflict notice.
	_, err = b.store.UpdateLine(context.Background(), b.editor.ID, b.project.ID, alice3.ID, studio.LineEdit{BaseRevision: alice3.Revision, StartMs: ptr(alice3.StartMs + 200)})
	require.NoError(t, err)
	r = clipRect(t, ctx, alice3.ID)
	require.NoError(t, chromedp.Do(ctx, drag((r.Left+r.Right)/2, (r.Top+r.Bottom)/2, 30)...))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('[data-testid=timeline-notice]').textContent.includes('in the meantime')`,
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "the usual conflict message")
	require.Equal(t, alice3.StartMs+200, b.line(t, alice3.ID).StartMs, "their version stays")

	_, err = chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`document.getElementById('line-%d').textContent.includes('00:00:04.200')`, alice3.ID),
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "the script's row shows their version too")
}

func ptr[T any](v T) *T { return &v }

// shot saves the part of the page under sel (its first match) in artifacts/.
func shot(t *testing.T, ctx context.Context, name, sel string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.Screenshot(css(sel)))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll("artifacts", 0o755))
	require.NoError(t, os.WriteFile(filepath.Join("artifacts", name), png, 0o644))
	t.Logf("screenshot: e2e/artifacts/%s (%d KB)", name, len(png)/1024)
}

// firstSound is how long the dub took, after a seek and play, to play from the
// picture's position.
const firstSound = `(async (at) => {
	const v = document.querySelector('[data-testid=picture-video]'), a = document.querySelector('[data-testid=picture-dub]');
	v.pause(); await new Promise(r => setTimeout(r, 300));
	const t0 = performance.now();
	v.currentTime = at; v.play();
	for (;;) {
		await new Promise(r => requestAnimationFrame(r));
		if (performance.now() - t0 > 30000) return {ms: -1, dub: a.currentTime, video: v.currentTime};
		if (!a.paused && !a.seeking && a.currentTime > at + 0.005 && Math.abs(a.currentTime - v.currentTime) < 0.1) {
			return {ms: performance.now() - t0, dub: a.currentTime, video: v.currentTime};
		}
	}
})(%f)`

type soundAt struct {
	Ms    float64 `json:"ms"`
	Dub   float64 `json:"dub"`
	Video float64 `json:"video"`
}

// TestPreviewFirstSoundAfterSeek measures the preview's time to first sound after a
// seek (issue 18's benchmark): in the editor, the picture is sought to each point
// and played; the time until the dub's element plays from that position is logged
// and written to artifacts/first-sound.txt (docs/benchmarks.md). The test checks the
// dub does play from each point; the times are figures, not assertions.
func TestPreviewFirstSoundAfterSeek(t *testing.T) {
	_, ctx, _ := editorWithPicture(t)
	points := []float64{0.5, 2.2, 4.1, 1.0, 6.5, 3.3, 5.7, 0.2, 7.0, 2.9}
	var warm []float64
	var out strings.Builder
	for i, at := range points {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[soundAt](fmt.Sprintf(firstSound, at), chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		require.GreaterOrEqual(t, s.Ms, 0.0, "the dub plays from %.1f s", at)
		fmt.Fprintf(&out, "seek %.1f s: first sound after %.0f ms (dub %.3f s, picture %.3f s)\n", at, s.Ms, s.Dub, s.Video)
		if i > 0 {
			warm = append(warm, s.Ms)
		}
	}
	sort.Float64s(warm)
	fmt.Fprintf(&out, "after the first (mix assembled): median %.0f ms, worst %.0f ms of %d seeks\n", warm[len(warm)/2], warm[len(warm)-1], len(warm))
	t.Log("\n" + out.String())
	require.NoError(t, os.MkdirAll("artifacts", 0o755))
	require.NoError(t, os.WriteFile(filepath.Join("artifacts", "first-sound.txt"), []byte(out.String()), 0o644))
}
