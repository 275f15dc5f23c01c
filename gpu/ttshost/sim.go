package ttshost

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	"dubstudio/gpu"
	"dubstudio/internal/simdev"
	"dubstudio/tts"
)

// SimLauncher starts simulator hosts (tts.Simulator) on simulated devices, one
// device per GPU UUID; it implements gpu.HostLauncher for tests and for a worker
// without a GPU that runs the simulator engine.
type SimLauncher struct {
	// Devices maps GPU UUIDs to their simulated devices.
	Devices map[string]*simdev.Device
	// Config is the template of every host's simulator; Device is set per launch.
	Config tts.SimulatorConfig
	// Configure, when set, adjusts the template for one launch (faults, speed).
	Configure func(opts gpu.LaunchOpts, cfg *tts.SimulatorConfig)
	// BorrowerBytes is what a host that borrows the weights holds (its CUDA
	// context); default SimBorrowerBytes.
	BorrowerBytes int64
	// Profile, when set, is the profile a GPU's next host starts with: with
	// Batching the host is a batching simulator of the profile's concurrency, beams and
	// KV cache, as the real launcher passes them (BatchArgs), shaped otherwise by
	// Config.Batch; without, a version-1 simulator (Config.Batch ignored).
	Profile func(gpu string) gpu.Profile

	mu      sync.Mutex
	lenders map[string]*SimHost // by GPU, the host lending its weights
}

// SimBorrowerBytes is a simulated borrower's memory: about what a CUDA context and
// a host's own small buffers take.
const SimBorrowerBytes = 600_000_000

var _ gpu.HostLauncher = (*SimLauncher)(nil)

// Launch loads a simulated model on the GPU's device; it fails with the
// simulator's out-of-memory error when the model does not fit.
func (l *SimLauncher) Launch(ctx context.Context, opts gpu.LaunchOpts) (gpu.Host, error) {
	return l.LaunchHost(ctx, opts)
}

// LaunchHost is Launch with the concrete type.
func (l *SimLauncher) LaunchHost(ctx context.Context, opts gpu.LaunchOpts) (*SimHost, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dev := l.Devices[opts.GPU]
	if dev == nil {
		return nil, fmt.Errorf("no simulated device for GPU %s: %w", opts.GPU, gpu.ErrInvalid)
	}
	cfg := l.Config
	cfg.Device = dev
	if l.Profile != nil {
		if p := l.Profile(opts.GPU); p.Batching {
			b := tts.SimBatch{}
			if cfg.Batch != nil {
				b = *cfg.Batch
			}
			b.MaxSequences, b.Beams = p.Concurrency, p.BeamsOrDefault()
			if p.KVCacheGiB > 0 {
				b.KVCacheBytes = p.KVCacheBytes()
			}
			cfg.Batch = &b
		} else {
			cfg.Batch = nil
		}
	}
	if l.Configure != nil {
		l.Configure(opts, &cfg)
	}
	var lender *SimHost
	if opts.Weights == gpu.WeightsBorrow {
		l.mu.Lock()
		lender = l.lenders[opts.GPU]
		l.mu.Unlock()
		if lender == nil || lender.check() {
			return nil, fmt.Errorf("starting simulated host %s: no host lends the weights on GPU %s", opts.ID, opts.GPU)
		}
		cfg.ResidentBytes = cmp.Or(l.BorrowerBytes, SimBorrowerBytes)
	}
	sim, err := tts.NewSimulator(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting simulated host %s: %w", opts.ID, err)
	}
	h := NewSimHost(sim)
	h.lender = lender
	if opts.Weights == gpu.WeightsLend {
		l.mu.Lock()
		if l.lenders == nil {
			l.lenders = map[string]*SimHost{}
		}
		l.lenders[opts.GPU] = h
		l.mu.Unlock()
	}
	return h, nil
}

// SimHost is an in-process simulator host. It implements gpu.Host; its process id
// is the simulated process's, which the simulated device lists.
type SimHost struct {
	sim    *tts.Simulator
	pid    int
	engine *simEngine
	// lender is the host whose weights this one maps; a request after it ended
	// crashes this one, as reading freed device memory would.
	lender *SimHost

	mu     sync.Mutex
	exited chan struct{}
	err    error
}

var _ EngineHost = (*SimHost)(nil)

// NewSimHost wraps a running simulator.
func NewSimHost(sim *tts.Simulator) *SimHost {
	h := &SimHost{sim: sim, pid: sim.Process().PID(), exited: make(chan struct{})}
	h.engine = &simEngine{Simulator: sim, h: h}
	return h
}

// Simulator returns the simulator (to inject faults).
func (h *SimHost) Simulator() *tts.Simulator { return h.sim }

// Engine returns the simulator; a request that finds the simulated process dead
// marks the host exited, as a crashed process would be noticed.
func (h *SimHost) Engine() tts.Engine { return h.engine }

// ResidentBytes is the simulated model's memory after load.
func (h *SimHost) ResidentBytes() int64 {
	info, err := h.sim.Info(context.Background())
	if err != nil {
		return 0
	}
	return info.ResidentBytes
}

// Batch reports a batching simulator's resident memory (weights and KV pool) and
// its activation bytes per audio second of a line (gpu.BatchingHost).
func (h *SimHost) Batch() (residentBytes int64, lineBytesPerSecond float64, ok bool) {
	b := h.sim.BatchInfo()
	if b == nil {
		return 0, 0, false
	}
	return h.ResidentBytes(), b.ActivationBytesPerSecond, true
}

// BatchInfo is a batching simulator's batch as a protocol-2 host reports it; nil
// for a version-1 simulator.
func (h *SimHost) BatchInfo() *tts.BatchInfo { return h.sim.BatchInfo() }

// BatchState is a batching simulator's batch now; nil for a version-1 one.
func (h *SimHost) BatchState(context.Context) (*tts.BatchInfo, error) {
	if h.check() {
		return nil, simdev.ErrExited
	}
	return h.sim.BatchInfo(), nil
}

// PID returns the simulated process id.
func (h *SimHost) PID() int { return h.pid }

// Concurrency is the simulator's declared concurrency.
func (h *SimHost) Concurrency() int {
	info, err := h.sim.Info(context.Background())
	if err != nil {
		return 1
	}
	return max(info.Concurrency, 1)
}

// Health fails once the simulated process has died.
func (h *SimHost) Health(ctx context.Context) error {
	if h.check() {
		return fmt.Errorf("simulated host %d has exited: %w", h.pid, h.ExitErr())
	}
	_, err := h.sim.Info(ctx)
	return err
}

// check notices a simulated process that died and reports whether it has.
func (h *SimHost) check() bool {
	if h.sim.Process().Stats().Exited {
		h.exit(errors.New("simulated host crashed"))
		return true
	}
	select {
	case <-h.exited:
		return true
	default:
		return false
	}
}

func (h *SimHost) exit(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.exited:
	default:
		h.err = err
		close(h.exited)
	}
}

// ReleaseCache empties the simulated allocator's cache.
func (h *SimHost) ReleaseCache(context.Context) (int64, error) {
	p := h.sim.Process()
	p.EmptyCache()
	st := p.Stats()
	if st.Exited {
		return 0, simdev.ErrExited
	}
	return st.Reserved - st.Allocated, nil
}

// Memory returns the simulated process's memory as NVML would list it.
func (h *SimHost) Memory(context.Context) (int64, gpu.MemoryCounter, error) {
	st := h.sim.Process().Stats()
	if st.Exited {
		return 0, "", simdev.ErrExited
	}
	return st.Used, gpu.CounterNVML, nil
}

// Exited is closed when the simulated process has died or been stopped.
func (h *SimHost) Exited() <-chan struct{} {
	h.check()
	return h.exited
}

// ExitErr says how it ended; nil after Stop.
func (h *SimHost) ExitErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Stop ends the simulated process.
func (h *SimHost) Stop(context.Context) error {
	_ = h.sim.Close()
	h.exit(nil)
	return nil
}

// Kill ends the simulated process as the OS would.
func (h *SimHost) Kill() error {
	_ = h.sim.Close()
	h.exit(errors.New("signal: killed"))
	return nil
}

// simEngine is the simulator, noticing a crash as the host's exit.
type simEngine struct {
	*tts.Simulator
	h *SimHost
}

// lenderGone crashes the host when the host whose weights it maps has ended.
func (e *simEngine) lenderGone() error {
	if l := e.h.lender; l == nil || !l.check() {
		return nil
	}
	_ = e.h.sim.Close()
	e.h.exit(errors.New("simulated host crashed: the weights it mapped were freed"))
	return fmt.Errorf("simulated host %d: %w", e.h.pid, tts.ErrUnavailable)
}

func (e *simEngine) Synthesize(ctx context.Context, req tts.Request) (tts.Result, error) {
	if err := e.lenderGone(); err != nil {
		return tts.Result{}, err
	}
	res, err := e.Simulator.Synthesize(ctx, req)
	if errors.Is(err, tts.ErrUnavailable) {
		e.h.check()
	}
	return res, err
}

func (e *simEngine) PrepareSpeaker(ctx context.Context, req tts.PrepareRequest) (tts.PrepareResult, error) {
	if err := e.lenderGone(); err != nil {
		return tts.PrepareResult{}, err
	}
	res, err := e.Simulator.PrepareSpeaker(ctx, req)
	if errors.Is(err, tts.ErrUnavailable) {
		e.h.check()
	}
	return res, err
}
