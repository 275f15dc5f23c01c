package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"dubstudio/config"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/web"
)

// browserPath finds Debian's Chromium. Outside CI a machine without it skips the
// browser tests; in CI (CI=true) that is a failure.
func browserPath(t *testing.T) string {
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (apt-get install chromium)")
	}
	t.Skip("chromium is not installed")
	return ""
}

// appConfig is the configuration of an app under test: defaults, its data in dataDir.
func appConfig(t *testing.T, dataDir string) *config.Config {
	t.Helper()
	cfg, err := config.LoadFrom(func(k string) (string, bool) {
		if k == "DATA_DIR" {
			return dataDir, true
		}
		return "", false
	})
	require.NoError(t, err)
	cfg.SessionSecret = strings.Repeat("s", 32)
	return cfg
}

type testBundle struct {
	store  *studio.Store
	server *httptest.Server
	editor *studio.User
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	store := studiotest.Store(t)
	cfg := appConfig(t, t.TempDir())
	srv := web.New(web.Deps{Config: cfg, Store: store, Logger: slog.New(slog.DiscardHandler)})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &testBundle{store: store, server: ts, editor: studiotest.User(t, store, studio.RoleEditor)}
}

// browser starts a fresh headless Chromium for one test, its steps bounded by 60 s.
func browser(t *testing.T) context.Context {
	t.Helper()
	return launch(t, 60*time.Second)
}

// launch starts a fresh headless Chromium for one test; the returned context ends
// after timeout. A failing test leaves a screenshot of the page in artifacts/.
func launch(t *testing.T, timeout time.Duration, flags ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browserPath(t)),
		chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(1400, 1000),
	)
	opts = append(opts, flags...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	base, cancel := chromedp.NewContext(allocCtx)
	// Start the browser on the long-lived context: a tab belongs to the context that
	// first ran on it, and the failure screenshot needs it after a timeout.
	if err := chromedp.Do(base); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	ctx, cancelTimeout := context.WithTimeout(base, timeout)
	t.Cleanup(func() {
		if t.Failed() {
			failureShot(t, base)
		}
		cancelTimeout()
		cancel()
		cancelAlloc()
	})
	return ctx
}

// failureShot saves what the page showed when the test failed.
func failureShot(t *testing.T, base context.Context) {
	t.Helper()
	shotCtx, cancel := context.WithTimeout(base, 5*time.Second)
	defer cancel()
	png, err := chromedp.Run(shotCtx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("failure screenshot: %v", err)
		return
	}
	if err := os.MkdirAll("artifacts", 0o755); err != nil {
		t.Logf("failure screenshot: %v", err)
		return
	}
	if err := os.WriteFile(filepath.Join("artifacts", t.Name()+"-failure.png"), png, 0o644); err != nil {
		t.Logf("failure screenshot: %v", err)
	}
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	dir := "artifacts"
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
}

type css = chromedp.CSS

func login(b *testBundle, u *studio.User) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(b.server.URL + "/projects"),
		chromedp.WaitVisible(css(`[data-testid=login-form]`)),
		chromedp.SendKeys(css(`input[name=username]`), u.Username),
		chromedp.SendKeys(css(`input[name=password]`), studiotest.Password),
		chromedp.Submit(css(`[data-testid=login-form]`)),
		chromedp.WaitVisible(css(`[data-testid=new-project]`)),
	}
}

// TestEditorFlow logs in, creates a project, imports an SRT, edits a line inline and
// checks that the row changed without a page reload.
func TestEditorFlow(t *testing.T) {
	b := setup(t)
	ctx := browser(t)
	srt, err := filepath.Abs("testdata/episode.srt")
	require.NoError(t, err)

	require.NoError(t, chromedp.Do(ctx, login(b, b.editor)...))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(css(`[data-testid=new-project] input[name=name]`), "Episode 7 <dub>"),
		chromedp.Click(css(`[data-testid=new-project] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=project-name]`)),
	))
	_, err = chromedp.Run(ctx, chromedp.Evaluate[int](`window.__noReload = 42`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		// A marker that survives only as long as the page is not reloaded.
		// A new project opens its import panel by itself.
		chromedp.WaitVisible(css(`[data-testid=import-panel][open] [data-testid=import-form]`)),
		chromedp.SetUploadFiles(css(`[data-testid=import-form] input[type=file]`), []string{srt}),
		chromedp.Click(css(`[data-testid=import-form] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=import-ok]`)),
	))
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=line-row]').length`))
	require.NoError(t, err)
	require.Equal(t, 4, rows)

	name, err := chromedp.Run(ctx, chromedp.Text(css(`[data-testid=project-name]`)))
	require.NoError(t, err)
	flags, err := chromedp.Run(ctx, chromedp.Text(css(`#lines tbody tr:nth-child(3)`)))
	require.NoError(t, err)
	require.Equal(t, "Episode 7 <dub>", name, "text is escaped, not interpreted")
	require.Contains(t, flags, "Overlaps the previous line", "line 3 starts before line 2 ends")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`#lines tbody tr:nth-child(2) [data-testid=line-text]`)),
		chromedp.WaitVisible(css(`[data-testid=line-form] textarea`)),
		chromedp.SetValue(css(`[data-testid=line-form] textarea`), `Out walking. "Us" & <next>.`),
		chromedp.Click(css(`[data-testid=save-line]`)),
		chromedp.WaitNotPresent(css(`[data-testid=line-form]`)),
	))
	rowText, err := chromedp.Run(ctx, chromedp.Text(css(`#lines tbody tr:nth-child(2) [data-testid=line-text]`)))
	require.NoError(t, err)
	marker, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.__noReload`))
	require.NoError(t, err)
	require.Contains(t, rowText, `Out walking. "Us" & <next>.`)
	require.Equal(t, 42, marker, "the row was swapped in place, the page never reloaded")
	screenshot(t, ctx, "editor.png")

	// The save reached the database as a new revision with history.
	page, err := b.store.Lines(context.Background(), mustProject(t, b), studio.LineFilter{})
	require.NoError(t, err)
	require.Equal(t, `Out walking. "Us" & <next>.`, page.Lines[1].Text)
	require.Equal(t, 2, page.Lines[1].Revision)
	fmt.Println("screenshot: e2e/artifacts/editor.png")
}

func mustProject(t *testing.T, b *testBundle) int64 {
	t.Helper()
	ps, err := b.store.Projects(context.Background(), studio.ProjectsOpts{})
	require.NoError(t, err)
	require.Len(t, ps, 1)
	return ps[0].ID
}

// TestGPUProfileSharesWeights creates a GPU profile with shared weights on the admin
// page and finds it stored and shown checked.
func TestGPUProfileSharesWeights(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := studiotest.User(t, b.store, studio.RoleAdmin)
	ctx := browser(t)
	row := `[data-testid=new-profile] `
	require.NoError(t, chromedp.Do(ctx, login(b, admin)...))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(b.server.URL+"/admin/gpus"),
		chromedp.WaitVisible(css(row+`input[name=Name]`)),
		chromedp.SendKeys(css(row+`input[name=Name]`), "rtx-4090-shared"),
		chromedp.Click(css(row+`input[name=ShareWeights]`)),
		chromedp.Click(css(`[data-testid=create-profile]`)),
		chromedp.WaitVisible(css(`[data-testid=profile-row] input[name=ShareWeights]:checked`)),
	))
	screenshot(t, ctx, "gpu-profiles.png")
	ps, err := b.store.GPUProfiles(context.Background())
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, "rtx-4090-shared", ps[0].Name)
	require.True(t, ps[0].ShareWeights)
	require.True(t, ps[0].FP16, "the other defaults stay")
}

// TestGPUProfileS2melPrecision creates a batching GPU profile with s2mel in bf16 on the
// admin page, through its select, and finds it stored and shown selected.
func TestGPUProfileS2melPrecision(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := studiotest.User(t, b.store, studio.RoleAdmin)
	ctx := browser(t)
	row := `[data-testid=new-profile] `
	require.NoError(t, chromedp.Do(ctx, login(b, admin)...))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(b.server.URL+"/admin/gpus"),
		chromedp.WaitVisible(css(row+`input[name=Name]`)),
		chromedp.SendKeys(css(row+`input[name=Name]`), "h200-bf16"),
		chromedp.Click(css(row+`input[name=Batching]`)),
		chromedp.SetValue(css(row+`select[name=S2melPrecision]`), "bf16"),
		chromedp.Click(css(`[data-testid=create-profile]`)),
		chromedp.WaitVisible(css(`[data-testid=profile-row] select[name=S2melPrecision]`)),
	))
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`document.querySelector('[data-testid=profile-row] select[name=S2melPrecision]').value`))
	require.NoError(t, err)
	require.Equal(t, "bf16", shown, "the stored precision is selected")
	ps, err := b.store.GPUProfiles(context.Background())
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, "bf16", ps[0].S2melPrecision)
	require.True(t, ps[0].Batching)
}
