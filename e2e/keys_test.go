package e2e

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// TestShortcutsWorkAfterTickingALine: an editor ticks a line's box (the click also
// moves the keyboard focus to its row) and goes on with the keyboard. The box has the
// browser's focus then; the shortcuts took any focused input for a text field and
// ignored every key, so j, k, a, r and e did nothing until the editor clicked
// elsewhere. The space bar stays the box's own: it ticks it.
func TestShortcutsWorkAfterTickingALine(t *testing.T) {
	b := setup(t)
	p := studiotest.Project(t, b.store, b.editor, 3)
	page, err := b.store.Lines(t.Context(), p.ID, studio.LineFilter{})
	require.NoError(t, err)
	first, second := page.Lines[0], page.Lines[1]
	ctx := browser(t)
	require.NoError(t, chromedp.Do(ctx, login(b, b.editor)...))
	box := fmt.Sprintf(`#line-%d input[name=line_id]`, first.ID)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/projects/%d", b.server.URL, p.ID)),
		chromedp.WaitVisible(css(`[data-testid=lines]`)),
		chromedp.Click(css(box)),
		chromedp.WaitVisible(css(fmt.Sprintf(`#line-%d.kb-focus`, first.ID))),
	))
	focused, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.activeElement.matches('input[name=line_id]')`))
	require.NoError(t, err)
	require.True(t, focused, "the box has the browser's focus")
	checked, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector(%q).checked`, box)))
	require.NoError(t, err)
	require.True(t, checked)

	require.NoError(t, chromedp.Do(ctx,
		chromedp.KeyEvent("j"),
		chromedp.WaitVisible(css(fmt.Sprintf(`#line-%d.kb-focus`, second.ID))),
	))
	// The space bar on the box still unticks it, and plays nothing.
	require.NoError(t, chromedp.Do(ctx, chromedp.Focus(css(box)), chromedp.KeyEvent(" ")))
	checked, err = chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector(%q).checked`, box)))
	require.NoError(t, err)
	require.False(t, checked, "space ticks the box, as always")
	// And e opens the focused line's editor.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.KeyEvent("e"),
		chromedp.WaitVisible(css(`[data-testid=line-form] textarea`)),
	))
}

// TestFilterReplacesTheTable: the filter's answer is the table's whole block
// (<div id="lines">), which the filter put inside the block it had (htmx's default
// swap): a second #lines in the first, and the shortcuts and the bulk form found
// the outer one. The block is replaced, and the shortcuts go on working in it.
func TestFilterReplacesTheTable(t *testing.T) {
	b := setup(t)
	p := studiotest.Project(t, b.store, b.editor, 3)
	page, err := b.store.Lines(t.Context(), p.ID, studio.LineFilter{})
	require.NoError(t, err)
	last := page.Lines[2]
	ctx := browser(t)
	require.NoError(t, chromedp.Do(ctx, login(b, b.editor)...))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/projects/%d", b.server.URL, p.ID)),
		chromedp.WaitVisible(css(`[data-testid=lines]`)),
		chromedp.SendKeys(css(`input[name=q]`), "number 3"), // the last line's text alone
		chromedp.WaitNotPresent(css(fmt.Sprintf(`#line-%d`, page.Lines[0].ID))),
	))
	blocks, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#lines').length`))
	require.NoError(t, err)
	require.Equal(t, 1, blocks, "one table block after the filter")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`h1`)),
		chromedp.KeyEvent("j"),
		chromedp.WaitVisible(css(fmt.Sprintf(`#line-%d.kb-focus`, last.ID))),
	))
}
