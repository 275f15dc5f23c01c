// Package ttshost adapts the speech engines of package tts to the GPU machinery of
// package gpu: a Launcher starts model-host processes (tts.StartHost, speaking the
// documented protocol) for a gpu.Pool and for calibration, and a SimLauncher starts
// in-process simulator hosts on a simulated device (internal/simdev) for tests and
// for machines without a GPU, whose readings NewSimDriver gives the monitor. Both
// kinds of host (PinnedHost, SimHost) are EngineHosts: a gpu.Host with an engine
// (Engine) that reports the memory its process holds (Memory).
package ttshost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"dubstudio/gpu"
	"dubstudio/tts"
)

// LauncherConfig configures a Launcher.
type LauncherConfig struct {
	// Name is the engine name the hosts' clients report ("indextts", "bench").
	Name string
	// Command returns the host's argv without the listen flag for a launch (the
	// profile's flags, such as --fp16, are the caller's business; the launcher adds
	// the flags of LaunchOpts.Weights).
	Command func(opts gpu.LaunchOpts) ([]string, error)
	// Env is added to the worker's environment, before LaunchOpts.Env (which pins the
	// GPU).
	Env []string
	// Dir is the hosts' working directory; empty: the worker's.
	Dir string
	// SocketDir holds the hosts' unix sockets; empty: a new directory under the
	// system's temporary directory (socket paths must stay under about 100 bytes).
	SocketDir string
	// Stderr returns where a host's log goes; nil: the worker's stderr.
	Stderr func(opts gpu.LaunchOpts) io.Writer
	// ReadyInterval is how often /health is polled while the model loads; default
	// 250 ms. The launch context bounds the wait.
	ReadyInterval time.Duration
	// ProcessBytes returns NVML's reading of a process on the host's GPU (the
	// monitor's); nil or not listed: the host's own report of its allocator's reserve.
	ProcessBytes func(gpuUUID string, pid int) (int64, bool)
}

// Launcher starts model hosts as child processes; it implements gpu.HostLauncher.
type Launcher struct {
	cfg  LauncherConfig
	seq  atomic.Int64
	once sync.Once
	dir  string
	err  error
}

var _ gpu.HostLauncher = (*Launcher)(nil)

// NewLauncher returns a launcher.
func NewLauncher(cfg LauncherConfig) *Launcher {
	if cfg.ReadyInterval <= 0 {
		cfg.ReadyInterval = 250 * time.Millisecond
	}
	return &Launcher{cfg: cfg}
}

func (l *Launcher) socketDir() (string, error) {
	l.once.Do(func() {
		if l.cfg.SocketDir != "" {
			l.dir, l.err = l.cfg.SocketDir, os.MkdirAll(l.cfg.SocketDir, 0o700)
			return
		}
		l.dir, l.err = os.MkdirTemp("", "dsh")
	})
	return l.dir, l.err
}

// Launch starts a host pinned to opts.GPU and waits until it answers /health. If
// that fails or ctx ends first, the process is killed.
func (l *Launcher) Launch(ctx context.Context, opts gpu.LaunchOpts) (gpu.Host, error) {
	return l.LaunchHost(ctx, opts)
}

// LaunchHost is Launch with the concrete type.
func (l *Launcher) LaunchHost(ctx context.Context, opts gpu.LaunchOpts) (*PinnedHost, error) {
	if l.cfg.Command == nil {
		return nil, fmt.Errorf("launching host %s: no command: %w", opts.ID, gpu.ErrInvalid)
	}
	argv, err := l.cfg.Command(opts)
	if err != nil {
		return nil, fmt.Errorf("building the command of host %s: %w", opts.ID, err)
	}
	dir, err := l.socketDir()
	if err != nil {
		return nil, fmt.Errorf("socket directory for host %s: %w", opts.ID, err)
	}
	sock := filepath.Join(dir, fmt.Sprintf("g%d-%d.sock", opts.GPUIndex, l.seq.Add(1)))
	if opts.Weights != gpu.WeightsOwn {
		// The hosts of one GPU meet at one socket: the lender serves its weights
		// there (docs/engines.md, --share-weights).
		argv = append(argv[:len(argv):len(argv)], "--share-weights", filepath.Join(dir, fmt.Sprintf("w%d.sock", opts.GPUIndex)),
			"--weights-role", string(opts.Weights))
	}
	var stderr io.Writer = os.Stderr
	if l.cfg.Stderr != nil {
		stderr = l.cfg.Stderr(opts)
	}
	env := append(append([]string{}, l.cfg.Env...), opts.Env...)
	p, err := tts.StartHost(ctx, tts.HostProcessConfig{Name: l.cfg.Name, Command: argv, Env: env, Dir: l.cfg.Dir,
		Socket: sock, Stderr: stderr})
	if err != nil {
		return nil, fmt.Errorf("starting host %s: %w", opts.ID, err)
	}
	h := &PinnedHost{opts: opts, proc: p, cfg: &l.cfg}
	health, err := waitHealthy(ctx, p, l.cfg.ReadyInterval)
	if err != nil {
		_ = h.Kill() // it never served; its exit is awaited next
		<-p.Done()
		return nil, fmt.Errorf("host %s did not become ready: %w", opts.ID, err)
	}
	h.info, h.batch = health.HostInfo, health.Batch
	return h, nil
}

// waitHealthy polls /health until the host answers, ctx ends or the process exits.
func waitHealthy(ctx context.Context, p *tts.HostProcess, interval time.Duration) (tts.HealthResponse, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.Done():
			cancel()
		case <-wctx.Done():
		}
	}()
	h, err := p.Client().WaitHealthy(wctx, interval)
	if err != nil {
		select {
		case <-p.Done():
			return h, fmt.Errorf("the process exited (%v) while loading: %w", p.Err(), err) //nolint:errorlint // the exit status is shown; err is the cause
		default:
		}
	}
	return h, err
}

// EngineHost is the model host of dubstudio: a gpu.Host (what the pool supervises)
// that serves a speech engine. Permits run lines on its Engine, the executor learns
// its model's size from ResidentBytes, and calibrations measure its Memory.
// PinnedHost and SimHost are EngineHosts.
type EngineHost interface {
	gpu.Host
	Engine() tts.Engine
	// ResidentBytes is the allocator's figure for the model after load; 0 if unknown.
	ResidentBytes() int64
	// Memory is what the host's process holds on the GPU now, and which counter it
	// was read from.
	Memory(ctx context.Context) (int64, gpu.MemoryCounter, error)
}

// PinnedHost is a model-host process started by a Launcher, pinned to one GPU
// (CUDA_VISIBLE_DEVICES); it wraps the tts.HostProcess that speaks the protocol.
type PinnedHost struct {
	opts  gpu.LaunchOpts
	proc  *tts.HostProcess
	cfg   *LauncherConfig
	info  tts.HostInfo
	batch *tts.BatchInfo // nil: not a batching host
}

var _ EngineHost = (*PinnedHost)(nil)

// Engine returns the client of the host.
func (h *PinnedHost) Engine() tts.Engine { return h.proc.Client() }

// Client returns the client of the host.
func (h *PinnedHost) Client() *tts.HostClient { return h.proc.Client() }

// Info returns what the host reported when it became ready.
func (h *PinnedHost) Info() tts.HostInfo { return h.info }

// ResidentBytes is the allocator's figure for the model after load, as the host
// reported it (torch.cuda.memory_allocated).
func (h *PinnedHost) ResidentBytes() int64 { return h.info.ResidentBytes }

// GPU returns the UUID of the host's GPU.
func (h *PinnedHost) GPU() string { return h.opts.GPU }

// PID returns the process id.
func (h *PinnedHost) PID() int { return h.proc.PID() }

// Batch reports a batching host's resident memory (weights and KV pool) and its
// activation bytes per audio second of a line, from its health at start
// (gpu.BatchingHost).
func (h *PinnedHost) Batch() (residentBytes int64, lineBytesPerSecond float64, ok bool) {
	if h.batch == nil {
		return 0, 0, false
	}
	return h.info.ResidentBytes, h.batch.ActivationBytesPerSecond, true
}

// BatchInfo is a batching host's batch as it reported it in its health at start
// (its sizes: KV pool, KV bytes per token, beams, maximum sequences); nil for a
// host that does not batch.
func (h *PinnedHost) BatchInfo() *tts.BatchInfo {
	if h.batch == nil {
		return nil
	}
	b := *h.batch
	return &b
}

// BatchState asks a batching host for its batch now (GET /health); nil, and no
// error, for a host that does not batch.
func (h *PinnedHost) BatchState(ctx context.Context) (*tts.BatchInfo, error) {
	if h.batch == nil {
		return nil, nil
	}
	r, err := h.proc.Client().Health(ctx)
	if err != nil {
		return nil, err
	}
	return r.Batch, nil
}

// BatchArgs are the flags that start a batching host for profile p (protocol 2,
// bench_host.py or indextts_host.py --batch): as many sequences as the profile's
// concurrency, its beams (one beam: the host samples, its default), KV cache (0: the
// host's own size) and s2mel precision; nil without batching.
func BatchArgs(p gpu.Profile) []string {
	if !p.Batching {
		return nil
	}
	return []string{"--batch", "--max-sequences", strconv.Itoa(p.Concurrency), "--beams", strconv.Itoa(p.BeamsOrDefault()),
		"--kv-cache-bytes", strconv.FormatInt(p.KVCacheBytes(), 10), "--s2mel-dtype", p.S2melPrecisionOrDefault()}
}

// Concurrency is what the host declared (at least 1).
func (h *PinnedHost) Concurrency() int { return max(h.info.Concurrency, 1) }

// Health returns nil while the host answers /health.
func (h *PinnedHost) Health(ctx context.Context) error {
	select {
	case <-h.proc.Done():
		return fmt.Errorf("host %s has exited: %v", h.opts.ID, h.proc.Err()) //nolint:errorlint // the exit status, possibly nil: shown, not wrapped
	default:
	}
	_, err := h.proc.Client().Health(ctx)
	return err
}

// ReleaseCache asks the host to give its allocator's unused reserve back and
// returns the reserve left beyond the model.
func (h *PinnedHost) ReleaseCache(ctx context.Context) (int64, error) {
	r, err := h.proc.Client().ReleaseCache(ctx)
	if err != nil {
		return 0, err
	}
	return max(r.ReservedAfter-r.Allocated, 0), nil
}

// Memory returns what the host's process holds on its GPU now: NVML's figure when
// the launcher can read it, else the allocator's reserve the host reports (which
// misses the CUDA context).
func (h *PinnedHost) Memory(ctx context.Context) (int64, gpu.MemoryCounter, error) {
	if f := h.cfg.ProcessBytes; f != nil {
		if b, ok := f(h.opts.GPU, h.PID()); ok && b > 0 {
			return b, gpu.CounterNVML, nil
		}
	}
	r, err := h.proc.Client().Health(ctx)
	if err != nil {
		return 0, "", err
	}
	return r.ReservedBytes, gpu.CounterTorchReserved, nil
}

// Exited is closed when the process has exited.
func (h *PinnedHost) Exited() <-chan struct{} { return h.proc.Done() }

// ExitErr says how the process ended.
func (h *PinnedHost) ExitErr() error { return h.proc.Err() }

// Stop asks the host to exit (SIGTERM) and kills it when ctx ends first.
func (h *PinnedHost) Stop(ctx context.Context) error { return h.proc.Stop(ctx) }

// Kill ends the host's process group at once (tts.StartHost gives the host its
// own group, so workers it forked go too).
func (h *PinnedHost) Kill() error {
	select {
	case <-h.proc.Done():
		return nil
	default:
	}
	if err := syscall.Kill(-h.PID(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing host %s: %w", h.opts.ID, err)
	}
	return nil
}
