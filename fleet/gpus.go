package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"dubstudio/gpu"
	"dubstudio/gpu/calibrate"
	"dubstudio/gpu/ttshost"
	"dubstudio/tts"
	"dubstudio/workflow"
)

// GPUsConfig configures NewGPUs.
type GPUsConfig struct {
	// Engine names the engine the model hosts run ("indextts", "bench",
	// "simulator"), for the worker registry.
	Engine string
	// Monitor reads the GPUs (NVML, or a simulated driver); it must be Available.
	// GPUs runs it (Start) and closes it (Stop).
	Monitor *gpu.Monitor
	// GPUs are the devices to schedule on; default every device of the monitor.
	GPUs []gpu.Device
	// Launcher starts the model hosts (gpu/ttshost).
	Launcher gpu.HostLauncher
	// Simulated marks simulated GPUs, so that pages say so.
	Simulated bool
	// Memory reads a GPU's used memory for calibrations; default NVML through the
	// monitor. A simulated device gives exact peaks.
	Memory func(uuid string) calibrate.DeviceMemory
	// TokensPerSecond is how many mel tokens a second of audio takes (IndexTTS-2 50,
	// 2.5 25): a request's max_mel_tokens is capped at the profile's longest
	// generation, with a fifth more for a line that runs slightly long.
	TokensPerSecond float64
	// Pool is the template of every GPU's pool (health checks, restart backoff);
	// GPU, Launcher and Registry are set per GPU.
	Pool     gpu.PoolConfig
	Executor gpu.ExecutorConfig
	Logger   *slog.Logger
	// SharedMonitor: the monitor belongs to someone else, who runs and closes it
	// (a calibration's GPUs share the worker's).
	SharedMonitor bool
	// ShareWeights: the engine's hosts can share one copy of the weights on a GPU
	// (gpu.Profile.ShareWeights); a profile asking for it is refused otherwise.
	ShareWeights bool
	// Batching: the engine's hosts can batch (protocol 2, gpu.Profile.Batching); a
	// profile asking for it is refused otherwise.
	Batching bool
}

// GPUs is the Permits of a GPU worker: the VRAM-budgeted executor (package gpu)
// over one pool of model-host processes per GPU. A permit's engine is the client of
// the host its lease names. Profiles and calibrations apply live (Apply), and a GPU
// can be handed to a calibration for a while (Calibrate).
type GPUs struct {
	cfg  GPUsConfig
	exec *gpu.Executor
	log  *slog.Logger

	mu      sync.Mutex
	order   []string
	gpus    map[string]*gpuEntry
	started bool
	runCtx  context.Context
	stopRun context.CancelFunc
	wg      sync.WaitGroup

	infoOnce  sync.Once
	infoReady chan struct{}
	info      tts.HostInfo
	capacity  int
}

type gpuEntry struct {
	dev  gpu.Device
	pool *gpu.Pool
	// applied settings
	profile       gpu.Profile
	cal           gpu.Calibration
	profileID     int64
	calibrationID int64
	problem       *gpu.Warning
	// calibration in progress: its profile starts the hosts, the pool is paused
	calibrating   int64
	launchProfile *gpu.Profile
	restarting    bool
	// batchHist is the batching host's recent batch readings (recordBatch).
	batchHist []gpu.BatchPoint
}

var _ workflow.Permits = (*GPUs)(nil)

// NewGPUs sets the executor and pools up with the default profile on every GPU;
// Apply the stored settings, then Start.
func NewGPUs(cfg GPUsConfig) (*GPUs, error) {
	if cfg.Monitor == nil || !cfg.Monitor.Available() {
		return nil, fmt.Errorf("GPUs need a GPU: %w", gpu.ErrNoGPU)
	}
	if cfg.Launcher == nil {
		return nil, fmt.Errorf("GPUs need a host launcher: %w", gpu.ErrInvalid)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TokensPerSecond <= 0 {
		cfg.TokensPerSecond = 50
	}
	if cfg.Executor.Logger == nil {
		cfg.Executor.Logger = cfg.Logger
	}
	devs := cfg.GPUs
	if len(devs) == 0 {
		devs = cfg.Monitor.Devices()
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("GPUs: no GPU selected: %w", gpu.ErrNoGPU)
	}
	s := &GPUs{cfg: cfg, exec: gpu.NewExecutor(cfg.Executor), log: cfg.Logger, gpus: map[string]*gpuEntry{},
		infoReady: make(chan struct{})}
	launcher := &recordingLauncher{HostLauncher: cfg.Launcher, s: s}
	for _, d := range devs {
		p := gpu.DefaultProfile()
		cal := gpu.DefaultCalibration(p)
		if err := s.exec.AddGPU(gpu.GPUConfig{UUID: d.UUID, Index: d.Index, Name: d.Name, TotalBytes: d.TotalBytes,
			Profile: p, Calibration: cal}); err != nil {
			return nil, err
		}
		if smp, ok := cfg.Monitor.Latest(d.UUID); ok {
			s.exec.Observe(smp)
		}
		pc := cfg.Pool
		pc.GPU, pc.GPUIndex, pc.Launcher, pc.Registry = d.UUID, d.Index, launcher, s.exec
		if pc.Logger == nil {
			pc.Logger = cfg.Logger
		}
		m, uuid := cfg.Monitor, d.UUID
		pc.ProcessMemory = func(pid int) (int64, bool) { return m.ProcessBytes(uuid, pid) }
		pool, err := gpu.NewPool(pc)
		if err != nil {
			return nil, err
		}
		s.order = append(s.order, d.UUID)
		s.gpus[d.UUID] = &gpuEntry{dev: d, pool: pool, profile: p, cal: cal}
		s.capacity += capacityOf(d.TotalBytes, cfg.ShareWeights, cfg.Batching)
	}
	return s, nil
}

// borrowerEstimate is what a host that borrows the weights is taken to hold before
// a calibration measures it: a little more than the 0.78 GB measured on an H200
// (docs/benchmarks.md, run 8).
const borrowerEstimate = gpu.GiB

// capacityOf is what River may hand a worker at once for a GPU of total bytes: as
// many lines as hosts could ever run there under the executor with the default
// prediction (with borrowers of about borrowerEstimate where the engine's hosts can
// share weights), at least 2, at most 16, so that a profile raised live is not held
// back by the queue; lines beyond the profile's concurrency wait for admission. Where the
// engine's hosts can batch it is gpu.MaxBatchSequences, so that a GPU switched to
// batching live gets as many lines as its one host may decode at once.
func capacityOf(total int64, share, batching bool) int {
	if batching {
		return gpu.MaxBatchSequences
	}
	p := gpu.DefaultProfile()
	p.ShareWeights = share
	cal := gpu.DefaultCalibration(p)
	if share {
		cal.BorrowerBytes = borrowerEstimate
	}
	return min(max(gpu.HostsThatFit(p, cal, total, 0), 2), 16)
}

// recordingLauncher keeps what the first ready host says about its model.
type recordingLauncher struct {
	gpu.HostLauncher
	s *GPUs
}

func (l *recordingLauncher) Launch(ctx context.Context, opts gpu.LaunchOpts) (gpu.Host, error) {
	h, err := l.HostLauncher.Launch(ctx, opts)
	if err == nil {
		l.s.noteHost(ctx, h)
	}
	return h, err
}

func (s *GPUs) noteHost(ctx context.Context, h any) {
	var info tts.HostInfo
	switch v := h.(type) {
	case interface{ Info() tts.HostInfo }:
		info = v.Info()
	case ttshost.EngineHost:
		i, err := v.Engine().Info(ctx)
		if err != nil {
			return
		}
		info = i
	default:
		return
	}
	s.infoOnce.Do(func() {
		s.info = info
		close(s.infoReady)
	})
}

// Executor is the admission executor (for tests and metrics).
func (s *GPUs) Executor() *gpu.Executor { return s.exec }

// Monitor is the GPUs' monitor.
func (s *GPUs) Monitor() *gpu.Monitor { return s.cfg.Monitor }

// Devices lists the GPUs scheduled on.
func (s *GPUs) Devices() []gpu.Device {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]gpu.Device, 0, len(s.order))
	for _, u := range s.order {
		out = append(out, s.gpus[u].dev)
	}
	return out
}

// Start samples the GPUs, feeds the executor and starts each GPU's hosts with its
// profile's concurrency, until ctx ends or Stop.
func (s *GPUs) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.started = true
	s.runCtx, s.stopRun = context.WithCancel(ctx)
	if !s.cfg.SharedMonitor {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); _ = s.cfg.Monitor.Run(s.runCtx) }()
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.exec.Follow(s.runCtx, s.cfg.Monitor) }()
	for _, u := range s.order {
		e := s.gpus[u]
		e.pool.Start(s.runCtx, e.profile.Hosts())
	}
}

// Stop drains the hosts (running syntheses finish until ctx ends, then they are
// killed) and stops sampling.
func (s *GPUs) Stop(ctx context.Context) error {
	s.mu.Lock()
	started := s.started
	pools := make([]*gpu.Pool, 0, len(s.order))
	for _, u := range s.order {
		pools = append(pools, s.gpus[u].pool)
	}
	s.mu.Unlock()
	var errs []error
	if started {
		for _, p := range pools {
			errs = append(errs, p.Stop(ctx))
		}
		s.stopRun()
		s.wg.Wait()
	}
	s.exec.Close()
	if !s.cfg.SharedMonitor {
		errs = append(errs, s.cfg.Monitor.Close())
	}
	return errors.Join(errs...)
}

// WaitServing waits until n of a GPU's hosts serve; it gives up when a host keeps
// failing to start.
func (s *GPUs) WaitServing(ctx context.Context, uuid string, n int) error {
	s.mu.Lock()
	e := s.gpus[uuid]
	s.mu.Unlock()
	if e == nil {
		return fmt.Errorf("GPU %s: %w", uuid, gpu.ErrInvalid)
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		serving := 0
		for _, h := range e.pool.Status() {
			if h.State == gpu.HostServing {
				serving++
			}
		}
		if serving >= n {
			return nil
		}
		for _, h := range e.pool.Status() {
			if h.Restarts >= 2 && h.LastError != "" {
				return fmt.Errorf("model host %s does not start: %s", h.ID, h.LastError)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d model hosts serving: %w", serving, n, ctx.Err())
		case <-t.C:
		}
	}
}

// waitEmpty waits until a pool has no host left (its retired hosts drained and
// stopped).
func waitEmpty(ctx context.Context, p *gpu.Pool) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for len(p.Status()) > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
