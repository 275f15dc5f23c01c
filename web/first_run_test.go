package web_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/script"
	"dubstudio/studio/studiotest"
)

// TestNewProjectInvitesTheFirstImport: a project without lines opens its import panel,
// first on the page, with a line on the formats and a sample script that imports as it
// is; a project with lines keeps the panel closed below the render bar and says when a
// filter matches nothing.
func TestNewProjectInvitesTheFirstImport(t *testing.T) {
	t.Parallel()
	b := setup(t)
	editor := b.as(t, studio.RoleEditor)
	empty := studiotest.Project(t, b.store, b.users[studio.RoleEditor], 0)

	d := doc(t, editor.get(fmt.Sprintf("/projects/%d", empty.ID)))
	_, open := d.Find(`[data-testid=import-panel]`).Attr("open")
	require.True(t, open, "the import panel is open")
	require.Equal(t, "import-panel", firstOf(d, "import-panel", "render-bar"), "and above the render bar")
	require.Contains(t, d.Find(`[data-testid=import-first]`).Text(), "SRT and WebVTT subtitles")
	require.Equal(t, "No lines yet: import a script above.", d.Find(`[data-testid=lines-empty]`).Text())
	href, _ := d.Find(`[data-testid=sample-script]`).Attr("href")

	resp := b.anon(t).get(href)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sample, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	cues, err := script.Parse(filepath.Base(href), sample)
	require.NoError(t, err, "the sample script imports as it is")
	require.NotEmpty(t, cues)
	require.NotEmpty(t, cues[0].Character, "and shows how characters are named")

	d = doc(t, editor.get(fmt.Sprintf("/projects/%d?q=no-such-words", b.project.ID)))
	_, open = d.Find(`[data-testid=import-panel]`).Attr("open")
	require.False(t, open, "a project with lines keeps the panel closed")
	require.Equal(t, "render-bar", firstOf(d, "import-panel", "render-bar"), "below the render bar")
	require.Equal(t, 1, d.Find(`[data-testid=import-panel]`).Length())
	require.Zero(t, d.Find(`[data-testid=import-first]`).Length())
	require.Contains(t, d.Find(`[data-testid=lines] td.empty`).Text(), "No lines match.")
}

// firstOf is which of two data-testid values comes first on the page.
func firstOf(d *goquery.Document, a, b string) string {
	first, _ := d.Find(`[data-testid=` + a + `], [data-testid=` + b + `]`).First().Attr("data-testid")
	return first
}

// TestFaviconAndOneNotFoundMessage: the favicon is served and linked; a 404 says the
// same thing whether the route or the record is missing, in the user's language.
func TestFaviconAndOneNotFoundMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp := b.anon(t).get("/favicon.ico")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "image/"), resp.Header.Get("Content-Type"))

	editor := b.as(t, studio.RoleEditor)
	d := doc(t, editor.get("/projects"))
	icon, _ := d.Find(`link[rel=icon]`).Attr("href")
	require.Equal(t, "/favicon.ico", icon)

	for _, path := range []string{"/no-such-page", "/projects/999999"} {
		resp := editor.get(path)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		require.Equal(t, "Not found.", doc(t, resp).Find(`[data-testid=error-message]`).Text(), path)
	}
	resp = editor.do("GET", "/no-such-page", nil, "", map[string]string{"Accept-Language": "zh-CN"})
	require.Equal(t, "未找到。", doc(t, resp).Find(`[data-testid=error-message]`).Text())
}

// TestDownloadsKeepTheProjectName: the export's zip and the script exports are named
// after the project in any script (RFC 6266 filename*), with an ASCII stand-in.
func TestDownloadsKeepTheProjectName(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	editor := b.users[studio.RoleEditor]
	require.NoError(t, b.store.RenameProject(ctx, b.project.ID, "Épisode 1 – 港口/夜"))
	ex, err := b.store.CreateExport(ctx, b.project.ID, editor.ID, studio.ExportOptions{}, func(context.Context, *sql.Tx, *studio.Export) error { return nil })
	require.NoError(t, err)
	dir := filepath.Join(b.cfg.DataDir, "exports")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("export-%d.zip", ex.ID)), []byte("PK\x05\x06"+strings.Repeat("\x00", 18)), 0o644))
	require.NoError(t, b.store.FinishExport(ctx, ex.ID, 3, 22, nil, ""))

	c := b.as(t, studio.RoleEditor)
	resp := c.get(fmt.Sprintf("/projects/%d/exports/%d/download", b.project.ID, ex.ID))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	want := fmt.Sprintf(`attachment; filename="_pisode 1 _ ____-export-%d.zip"; filename*=UTF-8''%%C3%%89pisode%%201%%20%%E2%%80%%93%%20%%E6%%B8%%AF%%E5%%8F%%A3_%%E5%%A4%%9C-export-%d.zip`, ex.ID, ex.ID)
	require.Equal(t, want, resp.Header.Get("Content-Disposition"))
	require.Equal(t, "application/zip", resp.Header.Get("Content-Type"))

	resp = c.get(fmt.Sprintf("/projects/%d/export.srt", b.project.ID))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Disposition"), `filename*=UTF-8''%C3%89pisode%201%20%E2%80%93%20%E6%B8%AF%E5%8F%A3_%E5%A4%9C.srt`)
}

// TestSignInLeadsBackToTheLinkOpened: the demo project's URL that `make run` prints
// leads, through the login form, to the demo project. The form posts back to its own
// URL, which carries where to go next.
func TestSignInLeadsBackToTheLinkOpened(t *testing.T) {
	t.Parallel()
	b := setup(t)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	hc := &http.Client{Jar: jar}
	target := fmt.Sprintf("%s/projects/%d", b.server.URL, b.project.ID)

	resp, err := hc.Get(target)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "/login", resp.Request.URL.Path)
	d := doc(t, resp)
	form := d.Find(`[data-testid=login-form]`)
	_, hasAction := form.Attr("action")
	require.False(t, hasAction, "the form posts to the page's own URL, next included")
	csrf, _ := form.Find(`input[name=_csrf]`).Attr("value")

	resp, err = hc.PostForm(resp.Request.URL.String(), url.Values{"_csrf": {csrf},
		"username": {b.users[studio.RoleEditor].Username}, "password": {studiotest.Password}})
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, target, resp.Request.URL.String())
}
