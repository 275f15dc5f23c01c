package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
)

// dialogs answers the page's confirm() dialogs: each gets the next answer given to
// answer (true accepts), and its message is kept.
type dialogs struct {
	mu       sync.Mutex
	answers  []bool
	messages []string
}

func answerDialogs(t *testing.T, ctx context.Context) *dialogs {
	t.Helper()
	d := &dialogs{}
	evs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range evs {
			if err != nil {
				return
			}
			d.mu.Lock()
			d.messages = append(d.messages, ev.Message)
			accept := false
			if len(d.answers) > 0 {
				accept, d.answers = d.answers[0], d.answers[1:]
			}
			d.mu.Unlock()
			if _, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: accept}); err != nil {
				return
			}
		}
	}()
	return d
}

func (d *dialogs) answer(accept bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.answers = append(d.answers, accept)
}

func (d *dialogs) seen() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.messages...)
}

// noOverlap is a script that says whether the boxes of the elements sel finds keep
// clear of each other and inside the element within finds.
func noOverlap(sel, within string) string {
	return fmt.Sprintf(`(() => { const bs = [...document.querySelectorAll(%q)].map(e => e.getBoundingClientRect());
		const box = document.querySelector(%q).getBoundingClientRect();
		if (bs.length < 2) return 'only ' + bs.length;
		for (const a of bs) {
			if (a.left < box.left - 0.5 || a.right > box.right + 0.5) return 'outside';
			for (const b of bs) if (a !== b && a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) return 'overlap';
		}
		return 'ok' })()`, sel, within)
}

// TestReviewOfATakeTooLongForItsSlot renders, with espeak-ng, a line far too long for
// its 3 s slot (100 ms of gap after it), and two short ones. The review view says how
// much speech was cut and draws it after the waveform, its timecodes clear of each
// other; approving the take asks first, from the script's a key and the review's;
// regenerate is off, since espeak-ng would say it the same way. Then the script
// table selects a range with shift-click and says what a bulk assign did; a
// character card's emotion select stays inside the card.
func TestReviewOfATakeTooLongForItsSlot(t *testing.T) {
	b := setupReviewWith(t, []studio.NewLine{
		{SourceLine: 1, StartMs: 0, EndMs: 3000, CharacterName: "Alice",
			Text: "This line runs far past the three seconds of its slot, so the duration lock has to cut the end of it off. " +
				"It keeps going with a second sentence, and then a third one, which nobody could say in the time it has."},
		{SourceLine: 2, StartMs: 3100, EndMs: 4600, CharacterName: "Alice", Text: "A short one."},
		{SourceLine: 3, StartMs: 5000, EndMs: 6500, CharacterName: "Captain Ahab of the Pequod", Text: "And another."},
	})
	long, mid, last := b.lines[0], b.lines[1], b.lines[2]
	require.Equal(t, studio.StateNeedsReview, long.State)
	ctx := browser(t)
	dl := answerDialogs(t, ctx)
	base := fmt.Sprintf("%s/projects/%d", b.server.URL, b.project.ID)
	require.NoError(t, chromedp.Do(ctx, login(b.testBundle, b.editor)...))

	// The script: a on the long line asks; cancelled, nothing is approved.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base),
		chromedp.WaitVisible(css(`[data-testid=lines]`)),
		chromedp.KeyEvent("j"),
		chromedp.WaitVisible(css(fmt.Sprintf(`#line-%d.kb-focus`, long.ID))),
	))
	// Character chips and each take's "3.00 s × 1.05" label keep to one line, however
	// narrow the text column leaves them.
	wraps, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
		const out = [];
		for (const c of document.querySelectorAll('#lines .chip')) {
			const lh = parseFloat(getComputedStyle(c).fontSize) * 1.6;
			if (c.getBoundingClientRect().height > lh + 8) out.push('chip ' + c.textContent);
		}
		for (const m of document.querySelectorAll('#lines .take-mini')) {
			const tops = [...m.children].map(e => Math.round(e.getBoundingClientRect().top));
			for (const e of m.children) {
				const lh = parseFloat(getComputedStyle(e).fontSize) * 1.6;
				if (e.getBoundingClientRect().height > lh + 8) out.push('label ' + e.textContent.trim());
			}
			if (Math.max(...tops) - Math.min(...tops) > 12) out.push('take-mini row ' + m.textContent.trim());
		}
		return out })()`))
	require.NoError(t, err)
	require.Empty(t, wraps, "nothing in the script's chips or take labels wraps")
	dl.answer(false)
	require.NoError(t, chromedp.Do(ctx, chromedp.KeyEvent("a")))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`true`, chromedp.WithPollingTimeout(time.Second)))
	require.NoError(t, err)
	require.Len(t, dl.seen(), 1, "a asked once")
	require.Contains(t, dl.seen()[0], "The take of line 1 needs review (")
	require.Contains(t, dl.seen()[0], "s over: cut at the slot's end with a short fade). Approve it anyway?")
	require.Nil(t, b.line(t, long.ID).ApprovedTakeID, "cancelled: not approved")

	// The review view of the long line.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/review?line=%d", base, long.ID)),
		chromedp.WaitVisible(css(`#review-panel article.take[data-take-id][data-ready=true]`)),
		chromedp.WaitVisible(css(`[data-testid=review-over]`)),
		chromedp.WaitVisible(css(`[data-testid=wave-over]`)),
	))
	take := fmt.Sprintf(`#take-%d`, *long.CurrentTakeID)
	over, err := chromedp.Run(ctx, chromedp.Text(css(take+` [data-testid=review-over]`)))
	require.NoError(t, err)
	require.Regexp(t, `^\d+\.\d\d s over: cut at the slot's end with a short fade$`, over)
	// The cut-off speech comes after the waveform, to scale: its width against the
	// waveform's is the cut against the take's 3.1 s.
	geo, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](fmt.Sprintf(`(() => {
		const w = document.querySelector('%[1]s [data-wave]').getBoundingClientRect();
		const o = document.querySelector('%[1]s [data-testid=wave-over]').getBoundingClientRect();
		return {waveRight: w.right, overLeft: o.left, waveWidth: w.width, overWidth: o.width,
			overMs: +document.querySelector('%[1]s [data-testid=review-over]').dataset.overMs} })()`, take)))
	require.NoError(t, err)
	require.InDelta(t, geo["waveRight"], geo["overLeft"], 1, "the cut part starts where the take ends")
	require.InDelta(t, geo["overMs"]/3100, geo["overWidth"]/geo["waveWidth"], 0.05)
	// The timecodes under the waveform keep clear of each other (the slot ends 100 ms
	// before the take: its label used to sit on the end's).
	apart, err := chromedp.Run(ctx, chromedp.Evaluate[string](noOverlap(take+` .wave-times span`, take+` .wave-times`)))
	require.NoError(t, err)
	require.Equal(t, "ok", apart)
	// Regenerate is off, saying why.
	disabled, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid=review-regenerate]').disabled`))
	require.NoError(t, err)
	require.True(t, disabled)
	why, err := chromedp.Run(ctx, chromedp.Text(css(`[data-testid=regenerate-same]`)))
	require.NoError(t, err)
	require.Contains(t, why, "espeak gives the same audio for the same text and voice")
	screenshot(t, ctx, "review-overlong.png")

	// a asks once; yes approves.
	dl.answer(true)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.KeyEvent("a"),
		chromedp.WaitVisible(css(take+` [data-testid=review-approved]`)),
	))
	require.Len(t, dl.seen(), 2)
	require.Contains(t, dl.seen()[1], "Take 1 needs review (")
	require.Equal(t, *long.CurrentTakeID, *b.line(t, long.ID).ApprovedTakeID)

	// A take that fits: approved with no question.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.KeyEvent("j"),
		chromedp.WaitVisible(css(fmt.Sprintf(`#review-panel[data-line-id="%d"] article.take[data-take-id][data-ready=true]`, mid.ID))),
		chromedp.KeyEvent("a"),
		chromedp.WaitVisible(css(`#review-panel article.take [data-testid=review-approved]`)),
	))
	require.Len(t, dl.seen(), 2, "no question for a take that fits")

	// Shift-click ticks the lines between; a bulk assign says what it did.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base),
		chromedp.WaitVisible(css(`[data-testid=lines]`)),
		chromedp.Click(css(fmt.Sprintf(`#line-%d input[name=line_id]`, long.ID))),
	))
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
		document.querySelector('#line-%d input[name=line_id]').dispatchEvent(new MouseEvent('click', {bubbles: true, shiftKey: true}));
		return true })()`, last.ID)))
	require.NoError(t, err)
	ticked, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#lines input[name=line_id]:checked').length`))
	require.NoError(t, err)
	require.Equal(t, 3, ticked, "the line between is ticked too")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SetValue(css(`#bulk select[name=character_id]`), ""),
		chromedp.Click(css(`#bulk button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=notice]`)),
	))
	notice, err := chromedp.Run(ctx, chromedp.Text(css(`[data-testid=notice]`)))
	require.NoError(t, err)
	require.Equal(t, "Removed the character from 3 lines.", notice)
	screenshot(t, ctx, "bulk-assigned.png")
	require.Nil(t, b.line(t, mid.ID).CharacterID)

	// The character card: the emotion select inside the card.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/characters"),
		chromedp.WaitVisible(css(`[data-testid=character-card] [data-testid=emotion-mode]`)),
	))
	inside, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`[...document.querySelectorAll('[data-testid=character-card]')].every(c => {
		const s = c.querySelector('[data-testid=emotion-mode]').getBoundingClientRect(), r = c.getBoundingClientRect();
		return s.left >= r.left && s.right <= r.right })`))
	require.NoError(t, err)
	require.True(t, inside, "the emotion select stays inside its card")
	// Each field of a card's form stays inside its own cell: no input or select runs
	// under the next field (a voice's long name once ran under the emotion select).
	overlaps, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid=character-card] .form-grid')].flatMap(g => {
		const cells = [...g.children].map(l => ({name: l.querySelector('input,select').name, box: l.getBoundingClientRect(),
			field: l.querySelector('input,select').getBoundingClientRect()}));
		return cells.flatMap(a => cells.filter(b => b !== a && a.field.right > b.box.left + 0.5 && a.field.left < b.box.right - 0.5 &&
			a.field.bottom > b.box.top + 0.5 && a.field.top < b.box.bottom - 0.5).map(b => a.name + " over " + b.name)) })`))
	require.NoError(t, err)
	require.Empty(t, overlaps, "fields of a character card run into each other")
	screenshot(t, ctx, "character-card.png")
	fmt.Println("screenshots: e2e/artifacts/bulk-assigned.png review-overlong.png character-card.png")
}
