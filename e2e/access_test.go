package e2e

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// TestMembersUnderTheCSP: under a CSP that runs no inline script and an htmx that
// evaluates nothing, a manager adds an editor to a project in its Members panel (an
// htmx swap), and the editor then finds the project, ticks every line with the
// select-all box and switches the language with the select that submits itself.
func TestMembersUnderTheCSP(t *testing.T) {
	b := setup(t)
	ctx := browser(t)
	manager := studiotest.User(t, b.store, studio.RoleManager)
	p := studiotest.Project(t, b.store, manager, 3)
	project := fmt.Sprintf("%s/projects/%d", b.server.URL, p.ID)

	require.NoError(t, chromedp.Do(ctx, login(b, manager)...))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(project+"/settings"),
		chromedp.WaitVisible(css(`[data-testid=member-form]`)),
		chromedp.SetValue(css(`[data-testid=member-form] select`), fmt.Sprint(b.editor.ID)),
		chromedp.Click(css(`[data-testid=member-form] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=member-row]:nth-child(2)`)),
	))
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=member-row]').length`))
	require.NoError(t, err)
	require.Equal(t, 2, rows, "the creator and the editor added")
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('form[action="/logout"]').submit(), true`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(`[data-testid=login-form]`))))

	require.NoError(t, chromedp.Do(ctx, login(b, b.editor)...))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(css(`[data-testid=project-row]`)),
		chromedp.Navigate(project),
		chromedp.WaitVisible(css(`[data-testid=line-row]`)),
	))
	// The box is clicked from script, not at its coordinates: on a loaded machine the
	// live progress card can move the table between where a mouse click is aimed and
	// where it lands. The click fires the same change event app.js handles.
	ticked, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(function () {
		document.querySelector('input[data-select-all]').click();
		return document.querySelectorAll('input[name=line_id]:checked').length;
	})()`))
	require.NoError(t, err)
	require.Equal(t, 3, ticked)

	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(function () {
		var s = document.querySelector('[data-testid=lang-select]');
		s.value = 'zh';
		s.dispatchEvent(new Event('change', { bubbles: true }));
		return true;
	})()`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(`html[lang=zh]`))))
}
