package tts

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// alive reports whether pid is a live process (a zombie is not).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	s := string(stat)
	rest := strings.TrimSpace(s[strings.LastIndexByte(s, ')')+1:])
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// TestHostIsReapedWithTheWorkersItForked starts hosts that fork a worker (as Python
// hosts do) which keeps the host's log open, then end them: crashing on their own,
// or ignoring SIGTERM until Stop kills them. The host's exit must be noticed (Done),
// or its lines wait for health checks on a dead host, and the worker must not
// outlive it, holding GPU memory no host accounts for.
func TestHostIsReapedWithTheWorkersItForked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script string
		end    func(p *HostProcess)
	}{
		{name: "crash", script: `sleep 600 & echo $! > "$1"; echo "LISTENING unix:$3"; sleep 0.2; exit 3`,
			end: func(*HostProcess) {}},
		{name: "stop_ignoring_sigterm",
			script: `trap '' TERM; sleep 600 & echo $! > "$1"; echo "LISTENING unix:$3"; while :; do sleep 1; done`,
			end: func(p *HostProcess) {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				require.Error(t, p.Stop(ctx))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "worker.pid")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p, err := StartHost(ctx, HostProcessConfig{Name: "test", Command: []string{"sh", "-c", tc.script, "sh", pidFile},
				Socket: filepath.Join(dir, "h.sock"), Stderr: &syncBuffer{}})
			require.NoError(t, err)
			var worker int
			require.Eventually(t, func() bool {
				data, err := os.ReadFile(pidFile)
				worker, _ = strconv.Atoi(strings.TrimSpace(string(data)))
				return err == nil && worker > 0
			}, 30*time.Second, 10*time.Millisecond)
			t.Cleanup(func() { _ = syscall.Kill(worker, syscall.SIGKILL) })

			tc.end(p)
			select {
			case <-p.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("the host's exit was never noticed: the worker it forked holds its log pipe")
			}
			require.Eventually(t, func() bool { return !alive(worker) }, 30*time.Second, 10*time.Millisecond,
				"the host's worker %d outlived it", worker)
		})
	}
}
