package workflow_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"dubstudio/migrations"
	"dubstudio/studio"
	"dubstudio/workflow"
)

// privatePostgres is a PostgreSQL server of the test's own, in a temporary directory,
// so that restarting it cannot disturb other tests (or other people's test runs) on
// the shared server.
type privatePostgres struct {
	bin, data, log, runAs string
	url                   string
}

// startPrivatePostgres initializes and starts a throwaway server, or skips the test
// saying why it cannot. The server is stopped and removed when the test ends.
func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	bin := postgresBinDir()
	if bin == "" {
		t.Skip("cannot restart PostgreSQL in this test: initdb and pg_ctl were not found (set PG_BINDIR)")
	}
	pg := &privatePostgres{bin: bin}
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		// initdb refuses to run as root: run the server as the postgres user.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("cannot restart PostgreSQL in this test: running as root and there is no postgres user to run a server as")
		}
		uid, err = strconv.Atoi(u.Uid)
		require.NoError(t, err)
		gid, err = strconv.Atoi(u.Gid)
		require.NoError(t, err)
		pg.runAs = "postgres"
	}
	pg.sweep()
	dir, err := os.MkdirTemp("", "dubpg") //nolint:usetesting // the postgres user must reach it: t.TempDir's parents are private
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	// A test binary killed by its timeout runs no cleanup: the next run stops its server.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644))
	if uid >= 0 {
		require.NoError(t, os.Chown(dir, uid, gid))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	pg.data, pg.log = filepath.Join(dir, "data"), filepath.Join(dir, "log")
	if out, err := pg.cmd("initdb", "-D", pg.data, "-A", "trust", "-U", "dubstudio", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		t.Skipf("cannot restart PostgreSQL in this test: initdb failed: %v\n%s", err, out)
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", port, dir)
	if out, err := pg.cmd("pg_ctl", "-D", pg.data, "-o", opts, "-l", pg.log, "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		t.Skipf("cannot restart PostgreSQL in this test: the private server did not start: %v\n%s", err, out)
	}
	// Never leave it running, whatever happens to the test.
	t.Cleanup(func() { _ = pg.cmd("pg_ctl", "-D", pg.data, "-m", "immediate", "-w", "stop").Run() })

	ctx := context.Background()
	admin, err := pgx.Connect(ctx, fmt.Sprintf("postgres://dubstudio@127.0.0.1:%d/postgres?sslmode=disable", port))
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE DATABASE dubstudio")
	admin.Close(ctx)
	require.NoError(t, err)
	pg.url = fmt.Sprintf("postgres://dubstudio@127.0.0.1:%d/dubstudio?sslmode=disable", port)
	pool, err := pgxpool.New(ctx, pg.url)
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, migrations.Apply(ctx, pool, slog.New(slog.DiscardHandler)))
	return pg
}

// postgresBinDir finds the server programs: PG_BINDIR, pg_config --bindir, or
// Debian's /usr/lib/postgresql/<version>/bin.
func postgresBinDir() string {
	has := func(dir string) bool {
		_, e1 := os.Stat(filepath.Join(dir, "initdb"))
		_, e2 := os.Stat(filepath.Join(dir, "pg_ctl"))
		return e1 == nil && e2 == nil
	}
	if d := os.Getenv("PG_BINDIR"); d != "" && has(d) {
		return d
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil && has(strings.TrimSpace(string(out))) {
		return strings.TrimSpace(string(out))
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if has(dirs[i]) {
			return dirs[i]
		}
	}
	return ""
}

// sweep stops and removes the private servers of test processes that are gone.
func (pg *privatePostgres) sweep() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "dubpg*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "owner"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(string(b))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) == nil {
			continue // its test is still running
		}
		if st, err := os.Stat(filepath.Join(dir, "data", "postmaster.pid")); err == nil && st.Mode().IsRegular() {
			_ = pg.cmd("pg_ctl", "-D", filepath.Join(dir, "data"), "-m", "immediate", "-w", "stop").Run()
		}
		os.RemoveAll(dir)
	}
}

func (pg *privatePostgres) cmd(name string, args ...string) *exec.Cmd {
	prog := filepath.Join(pg.bin, name)
	var c *exec.Cmd
	if pg.runAs != "" {
		c = exec.Command("runuser", append([]string{"-u", pg.runAs, "--", prog}, args...)...)
	} else {
		c = exec.Command(prog, args...)
	}
	c.WaitDelay = 10 * time.Second // a stray child holding our pipes must not hang the test
	return c
}

// restart stops the server and starts it again with the same options. mode is
// pg_ctl's shutdown mode: "fast" cuts every connection and writes everything down;
// "immediate" is a crash (no shutdown checkpoint: the server recovers from its log
// at start, and asynchronous commits not yet flushed are lost).
func (pg *privatePostgres) restart(t *testing.T, mode string) {
	t.Helper()
	// With -l the server's output goes to its log: were it to inherit our pipe, the
	// server would hold it open and CombinedOutput would never return.
	out, err := pg.cmd("pg_ctl", "-D", pg.data, "-l", pg.log, "-m", mode, "-w", "-t", "60", "restart").CombinedOutput()
	require.NoError(t, err, string(out))
}

// TestPostgresRestartMidRender restarts the database server twice in the middle of a
// 200-line render, the second time as a crash. Every connection of the worker is cut
// and the server refuses new ones for a moment; the render completes, every line done
// exactly once.
func TestPostgresRestartMidRender(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: renders 200 lines")
	}
	t.Parallel()
	pg := startPrivatePostgres(t)
	ctx := context.Background()
	pool, err := studio.Connect(ctx, pg.url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	store, err := studio.NewStore(pool)
	require.NoError(t, err)
	b := bundleOn(t, store, 200)
	b.startWorkerWith(t, workflow.NewLocalPermits(pacedSimulator(t), 2), nil)
	n, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	require.Equal(t, 200, n)

	for _, r := range []struct {
		at   int
		mode string
	}{{30, "fast"}, {110, "immediate"}} {
		b.waitProgress(t, r.at, 2*time.Minute)
		pg.restart(t, r.mode)
	}
	b.WaitSettled(t, 3*time.Minute)
	b.requireDoneOnce(t, 200)
}
