package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
)

// TestImportPreviewAndModes imports a Windows-1252 SRT through the preview (checking
// that nothing is written before the confirm, and that another encoding updates the
// preview), then a second script into the project in append and then merge mode,
// and a third that replaces the lines, each seen in the preview first.
func TestImportPreviewAndModes(t *testing.T) {
	b := setup(t)
	ctx := browser(t)
	file := func(name string) string {
		p, err := filepath.Abs(filepath.Join("testdata", name))
		require.NoError(t, err)
		return p
	}
	eval := func(js string) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("(() => { "+js+" })(), true"))
		require.NoError(t, err)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
		require.NoError(t, err)
		return s
	}
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
		require.NoError(t, err)
		return n
	}
	lines := func() []studio.Line {
		t.Helper()
		ls, err := b.store.AllLines(context.Background(), mustProject(t, b))
		require.NoError(t, err)
		return ls
	}
	// clearResult empties the preview, so that waiting for one waits for the next.
	clearResult := `document.getElementById('import-result').innerHTML = ''`

	require.NoError(t, chromedp.Do(ctx, login(b, b.editor)...))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(css(`[data-testid=new-project] input[name=name]`), "Import"),
		chromedp.Click(css(`[data-testid=new-project] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=import-panel][open] [data-testid=import-form]`)),
		chromedp.SetUploadFiles(css(`[data-testid=import-file]`), []string{file("import_fr.windows-1252.srt")}),
		chromedp.WaitVisible(css(`[data-testid=import-rows]`)),
	))
	require.Contains(t, text(`[data-testid=import-preview] [data-testid=import-read-as]`), "windows-1252")
	require.Equal(t, 4, count(`[data-testid=import-row]`))
	require.Equal(t, "Un café à la terrasse, s'il vous plaît.", text(`[data-testid=import-row]:nth-child(1) [data-testid=import-row-text]`))
	require.Equal(t, "ANNE", text(`[data-testid=import-row]:nth-child(1) [data-testid=import-row-character]`))
	require.Contains(t, text(`[data-testid=import-new-characters]`), "ANNE, PAUL")
	require.Contains(t, text(`[data-testid=import-flag-dialogue]`), "split")
	require.Empty(t, lines(), "a preview writes nothing")
	screenshot(t, ctx, "import-preview.png")

	// Another encoding: the preview follows it (UTF-8 cannot read these bytes).
	eval(clearResult)
	eval(`const s = document.querySelector('[data-testid=import-encoding]'); s.value = 'utf-8'; s.dispatchEvent(new Event('change', {bubbles: true}))`)
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(`[data-testid=import-preview] [data-testid=import-problems]`))))
	require.Contains(t, text(`[data-testid=import-problems]`), "line 3")
	screenshot(t, ctx, "import-encoding.png")
	eval(clearResult)
	eval(`const s = document.querySelector('[data-testid=import-encoding]'); s.value = 'windows-1252'; s.dispatchEvent(new Event('change', {bubbles: true}))`)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(css(`[data-testid=import-rows]`)),
		chromedp.Click(css(`[data-testid=import-confirm]`)),
		chromedp.WaitVisible(css(`[data-testid=import-ok]`)),
	))
	got := lines()
	require.Len(t, got, 4)
	require.Equal(t, "Où est la gare ? Déjà partie.", got[2].Text)

	// With lines, the form offers the modes. Append: the first cue repeats line 1.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Reload(),
		chromedp.WaitVisible(css(`[data-testid=import-panel]`)),
		chromedp.Click(css(`[data-testid=import-panel] summary`)),
		chromedp.WaitVisible(css(`[data-testid=import-mode-merge]`)),
		chromedp.SetUploadFiles(css(`[data-testid=import-file]`), []string{file("import_fr_v2.srt")}),
		chromedp.WaitVisible(css(`[data-testid=import-rows]`)),
	))
	require.Contains(t, text(`[data-testid=import-summary]`), "New lines: 2, updated: 0, unchanged: 0, exact duplicates skipped: 1")
	require.Contains(t, text(`[data-testid=import-row]:nth-child(1) [data-testid=import-row-action]`), "duplicate of line 1")
	screenshot(t, ctx, "import-append.png")

	// Merge: the preview follows the mode; line 2 is updated in its slot.
	eval(clearResult)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`[data-testid=import-mode-merge]`)),
		chromedp.WaitVisible(css(`[data-testid=import-rows]`)),
	))
	require.Contains(t, text(`[data-testid=import-summary]`), "New lines: 1, updated: 1, unchanged: 1")
	require.Contains(t, text(`[data-testid=import-row]:nth-child(2) [data-testid=import-row-action]`), "updates line 2")
	require.Contains(t, text(`[data-testid=import-new-characters]`), "CLAIRE")
	screenshot(t, ctx, "import-merge.png")
	require.Len(t, lines(), 4, "still nothing written")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`[data-testid=import-confirm]`)),
		chromedp.WaitVisible(css(`[data-testid=import-ok]`)),
	))
	got = lines()
	require.Len(t, got, 5)
	require.Equal(t, "Ne sois pas naïf : l'automne arrive.", got[1].Text)
	require.Equal(t, 3600, got[1].StartMs)
	require.Equal(t, "Bonsoir à tous.", got[4].Text, "numbered in time order")

	// Replace asks first, then deletes the lines and imports the file's.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Reload(),
		chromedp.WaitVisible(css(`[data-testid=import-panel]`)),
		chromedp.Click(css(`[data-testid=import-panel] summary`)),
		chromedp.Click(css(`[data-testid=import-mode-replace]`)),
		chromedp.SetUploadFiles(css(`[data-testid=import-file]`), []string{file("import_fr_v3.vtt")}),
		chromedp.WaitVisible(css(`[data-testid=import-rows]`)),
	))
	require.Contains(t, text(`[data-testid=import-deletes]`), "5 lines are deleted")
	screenshot(t, ctx, "import-replace.png")
	eval(`window.__asked = ''; window.confirm = (m) => { window.__asked = m; return true; }`)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`[data-testid=import-confirm]`)),
		chromedp.WaitVisible(css(`[data-testid=import-ok]`)),
	))
	asked, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.__asked`))
	require.NoError(t, err)
	require.Contains(t, asked, "Delete every line")
	got = lines()
	require.Len(t, got, 2)
	require.Equal(t, "Tout recommence.", got[0].Text)
	fmt.Println("screenshots: e2e/artifacts/import-*.png")
}

// TestImportFrameTimecodes imports a dubbing spreadsheet whose TC in/out count
// frames, drop-frame at 29.97: at the default rate (25: the project has no video) the
// preview refuses the drop-frame timecodes on their lines; the frame-rate select
// set to 29.97 previews the times in milliseconds, and the confirm stores them.
func TestImportFrameTimecodes(t *testing.T) {
	b := setup(t)
	ctx := browser(t)
	csv := filepath.Join(t.TempDir(), "dub_2997df.csv")
	require.NoError(t, os.WriteFile(csv, []byte("TC in,TC out,Character,Dialogue\n"+
		"00:00:01;12,00:00:02;00,ANNE,Bonjour.\n"+
		"00:01:00;02,00:01:01;00,PAUL,Salut.\n"), 0o644))
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
		require.NoError(t, err)
		return s
	}

	require.NoError(t, chromedp.Do(ctx, login(b, b.editor)...))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(css(`[data-testid=new-project] input[name=name]`), "Frames"),
		chromedp.Click(css(`[data-testid=new-project] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=import-panel][open] [data-testid=import-fps-select]`)),
		chromedp.SetUploadFiles(css(`[data-testid=import-file]`), []string{csv}),
		chromedp.WaitVisible(css(`[data-testid=import-preview] [data-testid=import-problems]`)),
	))
	problems := text(`[data-testid=import-problems]`)
	require.Contains(t, problems, `line 2: Timecode "00:00:01;12" is drop-frame`)
	require.Contains(t, problems, "the frame rate chosen is 25")

	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.getElementById('import-result').innerHTML = '';
		const s = document.querySelector('[data-testid=import-fps-select]'); s.value = '29.97';
		s.dispatchEvent(new Event('change', {bubbles: true})); })(), true`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(`[data-testid=import-rows]`))))
	require.Contains(t, text(`[data-testid=import-fps]`), "29.97 fps")
	require.Equal(t, "00:00:01.401 – 00:00:02.002", text(`[data-testid=import-row]:nth-child(1) [data-testid=import-row-time]`))
	require.Equal(t, "00:01:00.060 – 00:01:00.994", text(`[data-testid=import-row]:nth-child(2) [data-testid=import-row-time]`))
	require.Equal(t, "00:01:00;02 – 00:01:01;00", text(`[data-testid=import-row]:nth-child(2) [data-testid=import-row-source-time]`))
	screenshot(t, ctx, "import-frames.png")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`[data-testid=import-confirm]`)),
		chromedp.WaitVisible(css(`[data-testid=import-ok]`)),
	))
	got, err := b.store.AllLines(context.Background(), mustProject(t, b))
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, [2]int{1401, 2002}, [2]int{got[0].StartMs, got[0].EndMs})
	require.Equal(t, [2]int{60060, 60994}, [2]int{got[1].StartMs, got[1].EndMs})
}
