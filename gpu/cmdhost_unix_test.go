//go:build unix

package gpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// cmdLauncher launches plain child processes as the pool's hosts, for the pool's
// tests: the launcher owns the process (its environment, its process group, noticing
// its exit and stopping it), the test supplies the command and the health check.
// Production hosts are gpu/ttshost's.
type cmdLauncher struct {
	// Command builds the host's command (exec.Command, not CommandContext: the
	// process outlives the launch). The launcher appends LaunchOpts.Env to its
	// environment (the worker's own when Env is nil).
	Command func(opts LaunchOpts) (*exec.Cmd, error)
	// Ready waits until the host serves; nil: at once.
	Ready func(ctx context.Context, h *cmdHost) error
	// Health checks a serving host; nil: alive while the process runs.
	Health func(ctx context.Context, h *cmdHost) error
	// Release empties the host's cache; nil: not supported.
	Release func(ctx context.Context, h *cmdHost) (int64, error)
	// Concurrency is how many requests one host serves at once; default 1.
	Concurrency int
}

// Launch starts the process and waits for Ready. If Ready fails or ctx ends first,
// the process is killed.
func (l *cmdLauncher) Launch(ctx context.Context, opts LaunchOpts) (Host, error) {
	cmd, err := l.Command(opts)
	if err != nil {
		return nil, fmt.Errorf("building the command of host %s: %w", opts.ID, err)
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, opts.Env...)
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting host %s: %w", opts.ID, err)
	}
	h := &cmdHost{Opts: opts, cmd: cmd, launcher: l, exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		h.mu.Lock()
		h.exitErr = err
		h.mu.Unlock()
		close(h.exited)
	}()
	if l.Ready != nil {
		if err := l.Ready(ctx, h); err != nil {
			_ = h.Kill()
			<-h.exited
			return nil, fmt.Errorf("host %s did not become ready: %w", opts.ID, err)
		}
	}
	return h, nil
}

// cmdHost is a host started by cmdLauncher.
type cmdHost struct {
	Opts     LaunchOpts
	cmd      *exec.Cmd
	launcher *cmdLauncher
	exited   chan struct{}

	mu      sync.Mutex
	exitErr error
}

// PID returns the process id.
func (h *cmdHost) PID() int { return h.cmd.Process.Pid }

// Concurrency returns the launcher's Concurrency (at least 1).
func (h *cmdHost) Concurrency() int { return max(h.launcher.Concurrency, 1) }

// Health runs the launcher's check; a process that has exited is never healthy.
func (h *cmdHost) Health(ctx context.Context) error {
	select {
	case <-h.exited:
		return fmt.Errorf("host %s has exited: %w", h.Opts.ID, h.ExitErr())
	default:
	}
	if h.launcher.Health == nil {
		return nil
	}
	return h.launcher.Health(ctx, h)
}

// ReleaseCache runs the launcher's Release.
func (h *cmdHost) ReleaseCache(ctx context.Context) (int64, error) {
	if h.launcher.Release == nil {
		return 0, fmt.Errorf("host %s cannot release its cache: %w", h.Opts.ID, ErrNotSupported)
	}
	return h.launcher.Release(ctx, h)
}

// Exited is closed once the process has exited.
func (h *cmdHost) Exited() <-chan struct{} { return h.exited }

// ExitErr says how the process ended ("signal: killed" for an OS kill); nil while
// it runs or after a clean exit.
func (h *cmdHost) ExitErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.exitErr
}

// Stop sends SIGTERM to the host's process group and waits for the exit until ctx
// ends, then kills it.
func (h *cmdHost) Stop(ctx context.Context) error {
	if err := terminate(h.cmd); err != nil && !errors.Is(err, os.ErrProcessDone) {
		_ = h.Kill()
	}
	select {
	case <-h.exited:
		return nil
	case <-ctx.Done():
		_ = h.Kill()
		<-h.exited
		return fmt.Errorf("host %s did not stop in time, killed: %w", h.Opts.ID, ctx.Err())
	}
}

// Kill sends SIGKILL to the host's process group.
func (h *cmdHost) Kill() error {
	select {
	case <-h.exited:
		return nil
	default:
	}
	return kill(h.cmd)
}

// setProcessGroup puts the host in its own process group, so that stopping it also
// stops the workers it forks (Python hosts do).
func setProcessGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

func terminate(cmd *exec.Cmd) error { return signalGroup(cmd, syscall.SIGTERM) }

func kill(cmd *exec.Cmd) error { return signalGroup(cmd, syscall.SIGKILL) }

func signalGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	if cmd.Process == nil {
		return nil
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		return cmd.Process.Signal(sig)
	}
	return nil
}
