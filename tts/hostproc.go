package tts

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// HostProcessConfig describes a model-host process to start.
type HostProcessConfig struct {
	// Name is the engine name its client reports ("indextts", "bench").
	Name string
	// Command is the host's argv without the listen flag, e.g.
	// {"python3", "tts/hosts/indextts_host.py", "--model-dir", "/opt/indextts/checkpoints"}.
	Command []string
	// Env is added to the worker's environment (CUDA_VISIBLE_DEVICES=1, HF_HUB_OFFLINE=1).
	Env []string
	// Dir is the working directory; empty means the worker's.
	Dir string
	// Socket is the unix socket the host listens on (passed as --socket).
	Socket string
	// Stderr receives the host's log; nil discards it.
	Stderr io.Writer
}

// HostProcess is a running model host that this process started.
type HostProcess struct {
	cmd    *exec.Cmd
	client *HostClient
	addr   string
	done   chan struct{}
	mu     sync.Mutex
	err    error
}

// StartHost starts a model host and returns once it listens (it prints "LISTENING
// <address>"); the model may still be loading: call Client().WaitHealthy. ctx bounds
// the start only, not the process's life: end it with Stop.
func StartHost(ctx context.Context, cfg HostProcessConfig) (*HostProcess, error) {
	if len(cfg.Command) == 0 || cfg.Socket == "" {
		return nil, errors.New("starting model host: command and socket are required")
	}
	args := append(append([]string{}, cfg.Command[1:]...), "--socket", cfg.Socket)
	cmd := exec.Command(cfg.Command[0], args...)
	cmd.Dir = cfg.Dir
	cmd.Env = append(os.Environ(), cfg.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a signal to the worker's group does not reach it first
	// The log goes through a pipe of our own, not one exec copies: cmd.Wait would
	// wait for every process holding it, so a worker the host forked would keep its
	// exit from being noticed.
	var logR, logW *os.File
	switch w := cfg.Stderr.(type) {
	case nil:
	case *os.File:
		cmd.Stderr = w
	default:
		var err error
		if logR, logW, err = os.Pipe(); err != nil {
			return nil, fmt.Errorf("starting model host: %w", err)
		}
		cmd.Stderr = logW
	}
	closeLog := func() {
		if logW != nil {
			_ = logW.Close()
			_ = logR.Close()
		}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		closeLog()
		return nil, fmt.Errorf("starting model host: %w", err)
	}
	if err := cmd.Start(); err != nil {
		closeLog()
		return nil, fmt.Errorf("starting model host %s: %w", cfg.Command[0], err)
	}
	if logW != nil {
		_ = logW.Close()
		go func() {
			_, _ = io.Copy(cfg.Stderr, logR)
			_ = logR.Close()
		}()
	}
	p := &HostProcess{cmd: cmd, done: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		first := true
		for sc.Scan() {
			if first {
				lines <- sc.Text()
				first = false
			}
		}
		if first {
			close(lines)
		}
	}()
	go func() {
		err := cmd.Wait()
		// What the host forked is in its process group: it ends with the host, so
		// that no worker outlives it holding GPU memory (or the log pipe).
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	select {
	case line, ok := <-lines:
		addr, found := strings.CutPrefix(line, "LISTENING ")
		if !ok || !found {
			p.kill()
			return nil, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("model host did not start (first line %q)", line)}
		}
		p.addr = addr
	case <-ctx.Done():
		p.kill()
		return nil, fmt.Errorf("starting model host: %w", ctx.Err())
	}
	c, err := NewHostClient(HostClientConfig{Name: cfg.Name, Address: p.addr})
	if err != nil {
		p.kill()
		return nil, err
	}
	p.client = c
	return p, nil
}

// Client returns the client for this host.
func (p *HostProcess) Client() *HostClient { return p.client }

// Address returns where the host listens ("unix:/path").
func (p *HostProcess) Address() string { return p.addr }

// PID returns the host's process id.
func (p *HostProcess) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *HostProcess) Done() <-chan struct{} { return p.done }

// Err returns how the process exited (nil while running or after a clean exit).
func (p *HostProcess) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Stop sends SIGTERM and waits for the process to exit; when ctx ends first it kills
// the process. The host removes its socket on a clean stop.
func (p *HostProcess) Stop(ctx context.Context) error {
	_ = p.client.Close()
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("stopping model host %d: %w", p.PID(), ctx.Err())
	}
}

// kill ends the host's process group at once and waits a moment for the exit.
func (p *HostProcess) kill() {
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		_ = p.cmd.Process.Kill()
	}
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
}
