package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"dubstudio/internal/testdb"
)

// TestFirstRun walks a newcomer's first minutes as README.md tells them: `make run`
// (scripts/run.sh) on a database that does not exist yet, once named by DATABASE_URL
// and once without it (the local server, DUBSTUDIO_DB naming a fresh database instead
// of the developer's dubstudio). It reads the block run.sh ends with, signs in with the
// printed password, opens the demo project, creates a project, finds its import panel
// open and imports the sample script it links to; then the printed command sets a new
// password. Where the user may not create the database, run.sh stops with one sentence
// saying what to do.
func TestFirstRun(t *testing.T) {
	browserPath(t)
	server, err := url.Parse(testdb.ServerURL())
	require.NoError(t, err)
	// Sequential: both runs build the same bin/dubstudio.
	t.Run("DATABASE_URL", func(t *testing.T) {
		db := freshDatabaseName(t)
		u := *server
		u.Path = "/" + db
		firstRun(t, []string{"DATABASE_URL=" + u.String()})
	})
	t.Run("default", func(t *testing.T) {
		me, err := user.Current()
		require.NoError(t, err)
		if server.Host != "127.0.0.1:5432" || server.User.Username() != me.Username {
			t.Skipf("run.sh's default is %s@127.0.0.1:5432, the test server is %s", me.Username, testdb.ServerURL())
		}
		firstRun(t, []string{"DUBSTUDIO_DB=" + freshDatabaseName(t)})
	})
	t.Run("a user who may not create it", func(t *testing.T) {
		role := freshRole(t)
		u := *server
		u.User = url.User(role)
		u.Path = "/" + freshDatabaseName(t)
		cmd := exec.Command("./scripts/run.sh")
		cmd.Dir = ".."
		cmd.Env = append(cleanEnv(), "DATABASE_URL="+u.String(), "DATA_DIR="+t.TempDir(), "HTTP_ADDR="+freeAddr(t))
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "run.sh stops: %s", out)
		require.Contains(t, string(out), "may not create it: create it as a PostgreSQL superuser (createdb", "one sentence says what to do")
	})
}

// freshRole is a PostgreSQL role that may log in but not create databases, dropped
// when t ends.
func freshRole(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.ServerURL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	name := freshName(t, "dubstudio_firstrun_role_")
	_, err = conn.Exec(ctx, "CREATE ROLE "+name+" LOGIN NOCREATEDB")
	require.NoError(t, err)
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, testdb.ServerURL())
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP ROLE IF EXISTS "+name)
		require.NoError(t, err)
	})
	return name
}

func freshName(t *testing.T, prefix string) string {
	b := make([]byte, 5)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return prefix + hex.EncodeToString(b)
}

// freshDatabaseName names a database that does not exist, dropped when t ends.
func freshDatabaseName(t *testing.T) string {
	t.Helper()
	name := freshName(t, "dubstudio_firstrun_")
	t.Cleanup(func() { // after the app has stopped (cleanups run last first)
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, testdb.ServerURL())
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		require.NoError(t, err)
	})
	return name
}

// readyBlock is what run.sh prints last.
type readyBlock struct {
	open, user, password, newPassword string
}

func firstRun(t *testing.T, env []string) {
	addr := freeAddr(t)
	out, ready := startRun(t, append(env, "HTTP_ADDR="+addr, "DATA_DIR="+t.TempDir()))
	var r readyBlock
	select {
	case r = <-ready:
	case <-time.After(5 * time.Minute): // a build on a cold cache takes minutes
		t.Fatalf("run.sh printed no ready block:\n%s", out())
	}
	require.True(t, strings.HasPrefix(r.open, "http://"+addr+"/projects/"), "the demo project: %q", r.open)
	require.Equal(t, "admin", r.user)
	require.NotEmpty(t, r.password, "the first run prints the password")
	require.Contains(t, r.newPassword, "./bin/dubstudio user reset-password admin")

	ctx := browser(t)
	samplePath, err := filepath.Abs("../static/samples/sample-script.srt")
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(r.open),
		chromedp.WaitVisible(css(`[data-testid=login-form]`)),
		chromedp.SendKeys(css(`input[name=username]`), r.user),
		chromedp.SendKeys(css(`input[name=password]`), r.password),
		chromedp.Submit(css(`[data-testid=login-form]`)),
		chromedp.WaitVisible(css(`[data-testid=project-name]`)),
	))
	name, err := chromedp.Run(ctx, chromedp.Text(css(`[data-testid=project-name]`)))
	require.NoError(t, err)
	require.Contains(t, name, "Demo", "the printed URL opens the demo project")
	demoRows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=line-row]').length`))
	require.NoError(t, err)
	require.Equal(t, 8, demoRows)

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate("http://"+addr+"/projects"),
		chromedp.SendKeys(css(`[data-testid=new-project] input[name=name]`), "Première – 第一集"),
		chromedp.Click(css(`[data-testid=new-project] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=import-panel][open] [data-testid=import-form]`)),
		chromedp.WaitVisible(css(`[data-testid=import-first] [data-testid=sample-script]`)),
		chromedp.WaitVisible(css(`[data-testid=lines-empty]`)),
	))
	screenshot(t, ctx, "first-run-"+t.Name()[len("TestFirstRun/"):]+".png")
	href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid=sample-script]').getAttribute('href')`))
	require.NoError(t, err)
	require.Equal(t, "/static/samples/"+filepath.Base(samplePath), href, "the link serves the file imported here")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SetUploadFiles(css(`[data-testid=import-form] input[type=file]`), []string{samplePath}),
		chromedp.Click(css(`[data-testid=import-form] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=import-ok]`)),
		chromedp.WaitNotPresent(css(`[data-testid=lines-empty]`)),
	))
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=line-row]').length`))
	require.NoError(t, err)
	require.Equal(t, 6, rows, "the sample script's six lines")

	// The printed command sets a new password, on the database the app uses.
	cmd := exec.Command("sh", "-c", r.newPassword)
	cmd.Dir = ".."
	cmd.Env = cleanEnv()
	got, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", got)
	require.Contains(t, string(got), "new password for admin: ")
}

// startRun starts scripts/run.sh with env and stops it when t ends. It returns the
// output so far, and a channel that receives the ready block once it is printed.
func startRun(t *testing.T, env []string) (func() string, <-chan readyBlock) {
	t.Helper()
	cmd := exec.Command("./scripts/run.sh")
	cmd.Dir = ".."
	cmd.Env = append(cleanEnv(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the build too, when stopped early
	var mu sync.Mutex
	var all bytes.Buffer
	cmd.Stderr = lockedWriter{&mu, &all}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	ready := make(chan readyBlock, 1)
	go func() {
		var r readyBlock
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			all.WriteString(line + "\n")
			mu.Unlock()
			key, value, _ := strings.Cut(strings.TrimSpace(line), ":")
			value = strings.TrimSpace(value)
			switch key {
			case "Open":
				r.open, _, _ = strings.Cut(value, " ")
			case "User":
				r.user = value
			case "Password":
				r.password, _, _ = strings.Cut(value, " ")
			case "New password":
				r.newPassword = value
			case "Stop":
				ready <- r
			}
		}
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		// Ctrl+C, as the block says; the whole group if it does not stop.
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-done:
			require.NoError(t, err, "dubstudio stops cleanly on Ctrl+C")
		case <-time.After(40 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Logf("dubstudio after SIGKILL: %v", <-done)
			t.Errorf("dubstudio did not stop on Ctrl+C")
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("run.sh printed:\n%s", all.String())
			mu.Unlock()
		}
	})
	return func() string { mu.Lock(); defer mu.Unlock(); return all.String() }, ready
}

// cleanEnv is this process's environment without the settings a test run chooses,
// so that a developer's own (DATABASE_URL, HTTP_ADDR, ...) do not leak into it.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "DATABASE_URL", "DATA_DIR", "HTTP_ADDR", "BASE_URL", "DUBSTUDIO_DB", "DUBSTUDIO_PRIVATE_PG",
			"PGPORT_PRIVATE", "SESSION_SECRET", "SESSION_SECRET_FILE", "DEMO_PROJECT", "LOG_LEVEL", "ENGINE", "WORKER":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// freeAddr is a loopback address with a port nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
