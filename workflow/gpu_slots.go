package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"dubstudio/gpu"
	"dubstudio/gpu/calibrate"
	"dubstudio/i18n"
	"dubstudio/studio"
	"dubstudio/tts"
)

// GPUSlotsConfig configures NewGPUSlots.
type GPUSlotsConfig struct {
	// Engine names the engine the model hosts run ("indextts", "bench",
	// "simulator"), for the worker registry.
	Engine string
	// Monitor reads the GPUs (NVML, or a simulated driver); it must be Available.
	// GPUSlots runs it (Start) and closes it (Stop).
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
	// (a calibration's slots share the worker's).
	SharedMonitor bool
	// ShareWeights: the engine's hosts can share one copy of the weights on a GPU
	// (gpu.Profile.ShareWeights); a profile asking for it is refused otherwise.
	ShareWeights bool
}

// GPUSlots is the Slots of a GPU worker: the VRAM-budgeted executor (package gpu)
// over one pool of model-host processes per GPU. A slot's engine is the client of
// the host its lease names. Profiles and calibrations apply live (Apply), and a GPU
// can be handed to a calibration for a while (Calibrate).
type GPUSlots struct {
	cfg  GPUSlotsConfig
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
}

var _ Permits = (*GPUSlots)(nil)

// slotHost is what a slot needs of the host its lease names (gpu/ttshost's hosts).
type slotHost interface {
	Engine() tts.Engine
	Exited() <-chan struct{}
	Kill() error
	ResidentBytes() int64
}

// NewGPUSlots sets the executor and pools up with the default profile on every GPU;
// Apply the stored settings, then Start.
func NewGPUSlots(cfg GPUSlotsConfig) (*GPUSlots, error) {
	if cfg.Monitor == nil || !cfg.Monitor.Available() {
		return nil, fmt.Errorf("GPU slots need a GPU: %w", gpu.ErrNoGPU)
	}
	if cfg.Launcher == nil {
		return nil, fmt.Errorf("GPU slots need a host launcher: %w", gpu.ErrInvalid)
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
		return nil, fmt.Errorf("GPU slots: no GPU selected: %w", gpu.ErrNoGPU)
	}
	s := &GPUSlots{cfg: cfg, exec: gpu.NewExecutor(cfg.Executor), log: cfg.Logger, gpus: map[string]*gpuEntry{},
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
		s.capacity += capacityOf(d.TotalBytes, cfg.ShareWeights)
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
// back by the queue; lines beyond the profile's slots wait for admission.
func capacityOf(total int64, share bool) int {
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
	s *GPUSlots
}

func (l *recordingLauncher) Launch(ctx context.Context, opts gpu.LaunchOpts) (gpu.Host, error) {
	h, err := l.HostLauncher.Launch(ctx, opts)
	if err == nil {
		l.s.noteHost(ctx, h)
	}
	return h, err
}

func (s *GPUSlots) noteHost(ctx context.Context, h any) {
	var info tts.HostInfo
	switch v := h.(type) {
	case interface{ Info() tts.HostInfo }:
		info = v.Info()
	case slotHost:
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
func (s *GPUSlots) Executor() *gpu.Executor { return s.exec }

// Monitor is the GPUs' monitor.
func (s *GPUSlots) Monitor() *gpu.Monitor { return s.cfg.Monitor }

// Devices lists the GPUs the slots schedule on.
func (s *GPUSlots) Devices() []gpu.Device {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]gpu.Device, 0, len(s.order))
	for _, u := range s.order {
		out = append(out, s.gpus[u].dev)
	}
	return out
}

// Start samples the GPUs, feeds the executor and starts each GPU's hosts with its
// profile's slots, until ctx ends or Stop.
func (s *GPUSlots) Start(ctx context.Context) {
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
		e.pool.Start(s.runCtx, e.profile.MaxSlots)
	}
}

// Stop drains the hosts (running syntheses finish until ctx ends, then they are
// killed) and stops sampling.
func (s *GPUSlots) Stop(ctx context.Context) error {
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

// GPUSetting is what Apply puts in force on one GPU.
type GPUSetting struct {
	Profile       gpu.Profile
	Calibration   gpu.Calibration
	ProfileID     int64
	CalibrationID int64
}

// Apply puts a GPU's profile and calibration in force without a restart: the
// executor admits by them at once, the pool grows at once or drains its extra hosts
// first, and a change of the hosts' own settings (fp16, the emotion model, shared
// weights) restarts them after their work. A profile that cannot run one slot on the
// card with the measured numbers (gpu.CheckFits), or asks for shared weights the
// engine cannot give, is refused and the GPU keeps what it had; the refusal is shown
// with the GPU (Live).
func (s *GPUSlots) Apply(uuid string, st GPUSetting) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.gpus[uuid]
	if e == nil {
		return fmt.Errorf("GPU %s: %w", uuid, gpu.ErrInvalid)
	}
	if !st.Calibration.Calibrated() && st.Calibration.ResidentBytes == 0 {
		st.Calibration = gpu.DefaultCalibration(st.Profile)
	}
	var snap gpu.GPUSnapshot
	for _, g := range s.exec.Snapshot() {
		if g.UUID == uuid {
			snap = g
		}
	}
	err := gpu.CheckFits(st.Profile, st.Calibration, snap.TotalBytes, snap.ForeignBytes)
	if err == nil && st.Profile.ShareWeights && !s.cfg.ShareWeights {
		err = i18n.Errorf(gpu.ErrInvalid, "gpu.profile.share_unsupported", s.cfg.Engine)
	}
	if err != nil {
		if e.problem == nil || e.problem.Key != problemOf(err).Key {
			s.log.Warn("GPU profile refused", "gpu", uuid, "profile", st.Profile.Name, "error", err)
		}
		e.problem = problemOf(err)
		return err
	}
	e.problem = nil
	if e.profile == st.Profile && e.profileID == st.ProfileID && e.calibrationID == st.CalibrationID {
		return nil
	}
	old := e.profile
	if err := s.exec.SetCalibration(uuid, st.Calibration); err != nil {
		return err
	}
	if err := s.exec.SetProfile(uuid, st.Profile); err != nil {
		return err
	}
	e.profile, e.cal, e.profileID, e.calibrationID = st.Profile, st.Calibration, st.ProfileID, st.CalibrationID
	e.pool.SetShareWeights(st.Profile.ShareWeights) // for the hosts started from now on
	s.log.Info("GPU settings applied", "gpu", uuid, "profile", st.Profile.Name, "slots", st.Profile.MaxSlots,
		"calibration", st.CalibrationID)
	if !s.started || e.calibrating != 0 {
		return nil
	}
	if old.FP16 != st.Profile.FP16 || old.EmotionTextModel != st.Profile.EmotionTextModel ||
		old.ShareWeights != st.Profile.ShareWeights {
		s.restartLocked(e)
		return nil
	}
	if !e.restarting {
		e.pool.Resize(st.Profile.MaxSlots)
	}
	return nil
}

func problemOf(err error) *gpu.Warning {
	var ie *i18n.Error
	if errors.As(err, &ie) {
		return &gpu.Warning{Key: ie.Key, Args: ie.Args}
	}
	var ve *gpu.ValidationError
	if errors.As(err, &ve) && len(ve.Problems) > 0 {
		return &gpu.Warning{Key: ve.Problems[0].Key, Args: ve.Problems[0].Args}
	}
	return &gpu.Warning{Key: "render.internal", Args: []any{err.Error()}}
}

// restartLocked drains and stops a GPU's hosts, then starts them again with the
// current profile.
func (s *GPUSlots) restartLocked(e *gpuEntry) {
	if e.restarting {
		return
	}
	e.restarting = true
	e.pool.Resize(0)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = waitEmpty(s.runCtx, e.pool)
		s.mu.Lock()
		defer s.mu.Unlock()
		e.restarting = false
		if e.calibrating == 0 {
			e.pool.Resize(e.profile.MaxSlots)
		}
	}()
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

// LaunchProfile is the profile a GPU's next host starts with: the calibration's
// while one runs, else the GPU's.
func (s *GPUSlots) LaunchProfile(uuid string) gpu.Profile {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.gpus[uuid]
	if e == nil {
		return gpu.DefaultProfile()
	}
	if e.launchProfile != nil {
		return *e.launchProfile
	}
	return e.profile
}

// Calibrate takes a GPU from the pool for a calibration with profile p: its hosts
// drain (lines go to other GPUs or wait) and stop, the calibration starts its own,
// and the pool comes back afterwards.
func (s *GPUSlots) Calibrate(ctx context.Context, id int64, uuid string, p gpu.Profile, progress func(key string, args ...any)) (*calibrate.Result, error) {
	s.mu.Lock()
	e := s.gpus[uuid]
	if e == nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("GPU %s: %w", uuid, gpu.ErrInvalid)
	}
	if e.calibrating != 0 {
		s.mu.Unlock()
		return nil, fmt.Errorf("GPU %s is being calibrated: %w", uuid, gpu.ErrInvalid)
	}
	e.calibrating, e.launchProfile = id, &p
	e.pool.Resize(0)
	dev := e.dev
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		e.calibrating, e.launchProfile = 0, nil
		if s.started && !e.restarting {
			e.pool.Resize(e.profile.MaxSlots)
		}
	}()
	if progress == nil {
		progress = func(string, ...any) {}
	}
	progress("gpu.calibration.progress.waiting")
	if err := waitEmpty(ctx, e.pool); err != nil {
		return nil, err
	}
	var mem calibrate.DeviceMemory = monitorMemory{m: s.cfg.Monitor, uuid: uuid}
	if s.cfg.Memory != nil {
		mem = s.cfg.Memory(uuid)
	}
	adm := NewCalibrationSlots(s.cfg, dev)
	res, err := calibrate.Run(ctx, calibrate.Config{
		GPU: dev, Profile: p, Device: mem, Logger: s.log, Progress: progress, Admission: adm,
		Launch: func(ctx context.Context, i int) (calibrate.Host, error) {
			h, err := s.cfg.Launcher.Launch(ctx, gpu.LaunchOpts{GPU: uuid, GPUIndex: dev.Index,
				ID: fmt.Sprintf("%s/cal%d", uuid, i), Env: []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=" + uuid},
				Weights: p.WeightsRole(i)})
			if err != nil {
				return nil, err
			}
			ch, ok := h.(calibrate.Host)
			if !ok {
				_ = h.Kill()
				return nil, fmt.Errorf("host %T cannot be calibrated: %w", h, gpu.ErrInvalid)
			}
			return ch, nil
		},
	})
	adm.Stop()
	baseline := int64(-1)
	if res != nil && res.BaselineUsedBytes > 0 {
		baseline = res.BaselineUsedBytes
	}
	s.settleForeign(ctx, uuid, mem, baseline)
	return res, err
}

// settleForeign waits (at most 10 s) until the card's memory is back to baseline
// after a calibration's hosts stopped, then has the executor forget the foreign
// memory it saw meanwhile: those hosts were not the pool's, and the settings the
// calibration recommends must be checked against what others really hold.
func (s *GPUSlots) settleForeign(ctx context.Context, uuid string, mem calibrate.DeviceMemory, baseline int64) {
	deadline := time.Now().Add(10 * time.Second)
	for baseline >= 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		if used, ok := mem.Used(); !ok || used <= baseline+gpu.GiB/2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.exec.ForgetForeign(uuid)
	for _, smp := range s.cfg.Monitor.SampleNow(context.WithoutCancel(ctx)) {
		s.exec.Observe(smp)
	}
}

// CalibrationSlots runs a calibration's load test as the worker renders: slots of
// their own (an executor and a pool of hosts on the GPU being calibrated, whose
// worker pool, if any, is empty meanwhile), admitted by the calibration just
// measured, with as many slots as the step asks for. Its monitor must be running
// (Monitor.Run) while it is used; Stop it at the end.
type CalibrationSlots struct {
	cfg   GPUSlotsConfig
	dev   gpu.Device
	slots *GPUSlots
	seq   atomic.Int64
}

var _ calibrate.Admission = (*CalibrationSlots)(nil)

// NewCalibrationSlots returns the admission of a calibration of dev with profile p;
// cfg is the worker's slots' configuration (its monitor is shared, not closed).
func NewCalibrationSlots(cfg GPUSlotsConfig, dev gpu.Device) *CalibrationSlots {
	return &CalibrationSlots{cfg: cfg, dev: dev}
}

// Prepare readies the slots of profile p admitted by cal.
func (c *CalibrationSlots) Prepare(ctx context.Context, p gpu.Profile, cal gpu.Calibration) error {
	n := p.MaxSlots
	if c.slots == nil {
		cfg := c.cfg
		cfg.GPUs, cfg.SharedMonitor = []gpu.Device{c.dev}, true
		sl, err := NewGPUSlots(cfg)
		if err != nil {
			return err
		}
		c.slots = sl
		if err := sl.Apply(c.dev.UUID, GPUSetting{Profile: p, Calibration: cal}); err != nil {
			return err
		}
		sl.Start(ctx)
	} else if err := c.slots.Apply(c.dev.UUID, GPUSetting{Profile: p, Calibration: cal}); err != nil {
		return err
	}
	return c.slots.WaitServing(ctx, c.dev.UUID, n)
}

// Synthesize runs one line through a slot.
func (c *CalibrationSlots) Synthesize(ctx context.Context, req tts.Request, audioSeconds float64) (tts.Result, error) {
	sl, err := c.slots.Acquire(ctx, PermitRequest{LineID: c.seq.Add(1), AudioSeconds: audioSeconds,
		TextRunes: len([]rune(req.Text))})
	if err != nil {
		return tts.Result{}, err
	}
	res, err := sl.Engine().Synthesize(ctx, req)
	sl.Done(Outcome{PeakBytes: res.PeakReservedBytes, OOM: errors.Is(err, tts.ErrOutOfMemory), Failed: err != nil})
	return res, err
}

// Stop drains and stops the calibration's hosts.
func (c *CalibrationSlots) Stop() {
	if c.slots == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.slots.Stop(ctx); err != nil {
		c.slots.log.Warn("stopping the calibration's hosts", "err", err)
	}
}

// WaitServing waits until n of a GPU's hosts serve; it gives up when a host keeps
// failing to start.
func (s *GPUSlots) WaitServing(ctx context.Context, uuid string, n int) error {
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

// monitorMemory reads a GPU's used memory from NVML, freshly.
type monitorMemory struct {
	m    *gpu.Monitor
	uuid string
}

func (d monitorMemory) Used() (int64, bool) {
	for _, smp := range d.m.SampleNow(context.Background()) {
		if smp.UUID == d.uuid && smp.Has(gpu.MetricMemory) {
			return smp.UsedBytes, true
		}
	}
	return 0, false
}

// Acquire waits until the line may run on a GPU. A line longer than every GPU's
// profile allows, or whose predicted peak no GPU can ever give, is refused: the
// slot's engine fails it with a message the editor shows (split the line, or ask
// for a profile that allows it), never sending it to crash a host.
func (s *GPUSlots) Acquire(ctx context.Context, req PermitRequest) (Permit, error) {
	secs := req.AudioSeconds
	if req.LineID == 0 && req.TextRunes == 0 {
		// A speaker preparation: a short utterance whatever the worker asks.
		secs = min(secs, s.shortestMaxGen())
	}
	id := fmt.Sprintf("line %d", req.LineID)
	if req.LineID == 0 {
		id = "speaker preparation"
	}
	var lease *gpu.Lease
	var err error
	for {
		lease, err = s.exec.Acquire(ctx, gpu.Request{ID: id, AudioSeconds: secs})
		var nf *gpu.NeverFitsError
		if !errors.As(err, &nf) || nf.TooLong || !s.fitsCalibrated(secs) {
			break
		}
		// The executor holds the hosts bigger than calibrated for now (a host's model
		// is learnt from NVML once it is idle): the line fits the profile, so wait
		// rather than refuse it for good.
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a GPU slot for %s: %w", id, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	if err != nil {
		var nf *gpu.NeverFitsError
		if errors.As(err, &nf) {
			if nf.TooLong {
				return refusal{engine: s.cfg.Engine, err: userKey("render.too_long", nf.LimitSeconds)}, nil
			}
			return refusal{engine: s.cfg.Engine, err: userKey(nf.MessageKey(), nf.MessageArgs()...)}, nil
		}
		return nil, err
	}
	h, ok := lease.Handle.(slotHost)
	if !ok {
		_ = lease.Done(gpu.Outcome{NotRun: true})
		return nil, fmt.Errorf("GPU slot: host %s is a %T: %w", lease.HostID, lease.Handle, gpu.ErrInvalid)
	}
	s.mu.Lock()
	p := s.gpus[lease.GPU].profile
	s.mu.Unlock()
	sl := &gpuSlot{s: s, lease: lease, host: h, profile: p}
	sl.engine = &slotEngine{Engine: h.Engine(), slot: sl}
	return sl, nil
}

// fitsCalibrated reports whether a line of secs fits some GPU by its profile and
// calibration alone: its peak beside the models of all the profile's slots.
func (s *GPUSlots) fitsCalibrated(secs float64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.gpus {
		p := e.profile
		room := p.Budget(e.dev.TotalBytes, 0) - gpu.ModelsBytes(p, e.cal, p.MaxSlots)
		if secs <= p.MaxGenSeconds && e.cal.PeakBytes(secs) <= room {
			return true
		}
	}
	return false
}

func (s *GPUSlots) shortestMaxGen() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	least := math.Inf(1)
	for _, e := range s.gpus {
		least = min(least, e.profile.MaxGenSeconds)
	}
	return least
}

// Capacity is how many lines River hands this worker at once (see NewGPUSlots).
func (s *GPUSlots) Capacity() int { return s.capacity }

// Engines names the hosts' engine.
func (s *GPUSlots) Engines() []string { return []string{s.cfg.Engine} }

// Model describes the hosts' model, waiting for the first host to be ready.
func (s *GPUSlots) Model(ctx context.Context) (tts.HostInfo, error) {
	select {
	case <-s.infoReady:
		return s.info, nil
	case <-ctx.Done():
		return tts.HostInfo{}, fmt.Errorf("waiting for a model host to describe its model: %w", ctx.Err())
	}
}

// gpuSlot is an admitted line: a lease on one host of one GPU.
type gpuSlot struct {
	s       *GPUSlots
	lease   *gpu.Lease
	host    slotHost
	profile gpu.Profile
	engine  *slotEngine
	once    sync.Once
}

func (g *gpuSlot) Engine() tts.Engine { return g.engine }
func (g *gpuSlot) Device() string     { return g.lease.GPU }

// Done reports the outcome to the executor: the measured peak (which corrects the
// prediction), an out-of-memory error (which raises the GPU's safety factor), a host
// that died or hung (which is killed and restarted by its pool).
func (g *gpuSlot) Done(o Outcome) {
	g.once.Do(func() {
		e := g.engine
		e.mu.Lock()
		res, err, ran := e.res, e.err, e.ran
		e.mu.Unlock()
		out := gpu.Outcome{NotRun: !ran && !o.Hung}
		switch {
		case o.Hung:
			// The request may still run on the host: kill it, its pool starts another.
			_ = g.host.Kill()
			out.HostDied = true
		case errors.Is(err, tts.ErrOutOfMemory) || o.OOM:
			out.OOM = true
		case errors.Is(err, tts.ErrUnavailable) && hostExited(g.host, g.lease):
			out.HostDied = true
		}
		if resident := g.host.ResidentBytes(); resident > 0 && res.PeakAllocatedBytes > 0 {
			out.PeakBytes = max(res.PeakAllocatedBytes-resident, 0)
			out.CachedAfter = max(res.PeakReservedBytes-resident, 0)
		}
		if rerr := g.lease.Done(out); rerr != nil {
			g.s.log.Warn("synthesis to run again", "gpu", g.lease.GPU, "host", g.lease.HostID, "reason", rerr)
		}
	})
}

// hostExited reports whether the host died (or its lease was taken away), giving
// the process a moment to be reaped after its connection dropped.
func hostExited(h slotHost, l *gpu.Lease) bool {
	select {
	case <-h.Exited():
		return true
	case <-l.Lost():
		return true
	case <-time.After(3 * time.Second):
		return false
	}
}

// slotEngine is the leased host's engine: it applies the GPU's profile to the
// request (segment size, generation cap), stops waiting when the lease is lost
// (GPU lost, host gone) and keeps the outcome for Done.
type slotEngine struct {
	tts.Engine
	slot *gpuSlot

	mu  sync.Mutex
	res tts.Result
	err error
	ran bool
}

func (e *slotEngine) run(ctx context.Context, do func(ctx context.Context) error) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l := e.slot.lease
	go func() {
		select {
		case <-l.Lost():
			cancel()
		case <-lctx.Done():
		}
	}()
	err := do(lctx)
	if err != nil && ctx.Err() == nil {
		select {
		case <-l.Lost():
			// The GPU was lost or the host removed under the request: retry elsewhere.
			err = &tts.Error{Code: tts.CodeUnavailable, Message: "the GPU or its model host went away", Err: l.Err()}
		default:
			if errors.Is(err, tts.ErrUnavailable) && hostExited(e.slot.host, l) {
				err = &tts.Error{Code: tts.CodeUnavailable, Message: "the model host died mid-line",
					Err: &gpu.RetryableError{Reason: gpu.ReasonHostDied, GPU: l.GPU, Err: err}}
			}
		}
	}
	return err
}

// Synthesize runs the line on the leased host.
func (e *slotEngine) Synthesize(ctx context.Context, req tts.Request) (tts.Result, error) {
	p := e.slot.profile
	if req.MaxTextTokensPerSegment == 0 {
		req.MaxTextTokensPerSegment = p.SegmentTokens
	}
	if req.MaxMelTokens == 0 {
		req.MaxMelTokens = int(math.Ceil(p.MaxGenSeconds * 1.2 * e.slot.s.cfg.TokensPerSecond))
	}
	var res tts.Result
	err := e.run(ctx, func(ctx context.Context) error {
		var err error
		res, err = e.Engine.Synthesize(ctx, req)
		return err
	})
	e.mu.Lock()
	e.res, e.err, e.ran = res, err, true
	e.mu.Unlock()
	return res, err
}

// PrepareSpeaker computes a speaker's conditioning on the leased host.
func (e *slotEngine) PrepareSpeaker(ctx context.Context, req tts.PrepareRequest) (tts.PrepareResult, error) {
	var res tts.PrepareResult
	err := e.run(ctx, func(ctx context.Context) error {
		var err error
		res, err = e.Engine.PrepareSpeaker(ctx, req)
		return err
	})
	e.mu.Lock()
	e.err, e.ran = err, true
	e.mu.Unlock()
	return res, err
}

// refusal is the slot of a line that can never run: its engine fails the line with
// the reason (a permanent failure the editor shows).
type refusal struct {
	engine string
	err    error
}

func (r refusal) Engine() tts.Engine { return refusingEngine(r) }
func (r refusal) Device() string     { return "" }
func (r refusal) Done(Outcome)       {}

type refusingEngine refusal

func (r refusingEngine) Name() string { return r.engine }
func (r refusingEngine) Info(context.Context) (tts.HostInfo, error) {
	return tts.HostInfo{}, r.err
}
func (r refusingEngine) PrepareSpeaker(context.Context, tts.PrepareRequest) (tts.PrepareResult, error) {
	return tts.PrepareResult{}, r.err
}
func (r refusingEngine) Synthesize(context.Context, tts.Request) (tts.Result, error) {
	return tts.Result{}, r.err
}
func (r refusingEngine) Close() error { return nil }

// Live describes the GPUs for the admin page and /metrics: the recent samples, the
// executor's budget and slots, the pools and the settings in force.
func (s *GPUSlots) Live(recent time.Duration) gpu.LiveState {
	m := s.exec.Metrics()
	snaps := s.exec.Snapshot()
	st := gpu.LiveState{Engine: s.cfg.Engine, Simulated: s.cfg.Simulated, Waiting: m.Waiting, NeverFits: m.NeverFits,
		At: time.Now()}
	devs := map[string]gpu.Device{}
	for _, d := range s.cfg.Monitor.Devices() {
		devs[d.UUID] = d
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.order {
		e := s.gpus[u]
		g := gpu.LiveGPU{Device: e.dev, ProfileID: e.profileID, CalibrationID: e.calibrationID,
			ProfileProblem: e.problem, Calibrating: e.calibrating, Pool: e.pool.Status()}
		if d, ok := devs[u]; ok {
			g.Device.Lost = d.Lost
		}
		for _, sn := range snaps {
			if sn.UUID == u {
				g.Snapshot = sn
			}
		}
		for _, gm := range m.GPUs {
			if gm.UUID == u {
				g.Counters = gm.GPUCounters
			}
		}
		hist := s.cfg.Monitor.History(u, st.At.Add(-recent))
		for _, smp := range hist {
			g.Recent = append(g.Recent, gpu.PointOf(smp))
		}
		if n := len(hist); n > 0 {
			latest := g.Recent[n-1]
			g.Latest = &latest
			g.Processes = hist[n-1].Processes
		}
		st.GPUs = append(st.GPUs, g)
	}
	return st
}

// GPUAgentConfig configures NewGPUAgent.
type GPUAgentConfig struct {
	// Worker is the worker's registry name; Host its machine.
	Worker, Host string
	// PublishEvery is how often the live state is published; default 2 s.
	PublishEvery time.Duration
	// SettingsEvery is how often profiles, assignments and calibration requests are
	// read; default 3 s.
	SettingsEvery time.Duration
	// Recent is how much sample history a published state carries; default 2 min.
	Recent time.Duration
	// KeepHistory is how long per-minute history is kept; default 30 days.
	KeepHistory time.Duration
	Logger      *slog.Logger
}

// GPUAgent connects a worker's GPUSlots to the database: it registers the GPUs,
// publishes their live state, stores per-minute history, applies profile and
// calibration changes as admins make them, and runs the calibrations requested for
// its GPUs.
type GPUAgent struct {
	cfg   GPUAgentConfig
	store *studio.Store
	slots *GPUSlots
	log   *slog.Logger

	mu      sync.Mutex
	saved   map[string]time.Time // history stored up to, per GPU
	running map[int64]bool
	wg      sync.WaitGroup
}

// NewGPUAgent returns an agent; Run it.
func NewGPUAgent(store *studio.Store, slots *GPUSlots, cfg GPUAgentConfig) *GPUAgent {
	if cfg.PublishEvery <= 0 {
		cfg.PublishEvery = 2 * time.Second
	}
	if cfg.SettingsEvery <= 0 {
		cfg.SettingsEvery = 3 * time.Second
	}
	if cfg.Recent <= 0 {
		cfg.Recent = 2 * time.Minute
	}
	if cfg.KeepHistory <= 0 {
		cfg.KeepHistory = 30 * 24 * time.Hour
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &GPUAgent{cfg: cfg, store: store, slots: slots, log: cfg.Logger, saved: map[string]time.Time{},
		running: map[int64]bool{}}
}

// ApplySettings reads the GPUs' profiles and calibrations and puts them in force.
func (a *GPUAgent) ApplySettings(ctx context.Context) error {
	devs := a.slots.Devices()
	uuids := make([]string, len(devs))
	for i, d := range devs {
		uuids[i] = d.UUID
	}
	settings, err := a.store.GPUSettings(ctx, uuids)
	if err != nil {
		return err
	}
	for _, u := range uuids {
		st := GPUSetting{Profile: gpu.DefaultProfile()}
		if cur, ok := settings[u]; ok {
			st.Profile, st.ProfileID = ProfileOf(*cur.Profile), cur.Profile.ID
			if cur.CalibrationID != nil && len(cur.Calibration) > 0 {
				var r calibrate.Result
				if err := json.Unmarshal(cur.Calibration, &r); err != nil {
					a.log.WarnContext(ctx, "unreadable calibration", "gpu", u, "calibration", *cur.CalibrationID, "err", err)
				} else {
					st.Calibration, st.CalibrationID = r.Calibration, *cur.CalibrationID
				}
			}
		}
		_ = a.slots.Apply(u, st) // a refusal is published with the GPU
	}
	return nil
}

// ProfileOf converts a stored profile.
func ProfileOf(p studio.GPUProfile) gpu.Profile {
	return gpu.Profile{Name: p.Name, MaxSlots: p.MaxSlots, ReservePct: p.ReservePct,
		LongTextThresholdSec: p.LongTextThresholdSec, LongLaneLimit: p.LongLaneLimit, MaxGenSeconds: p.MaxGenSeconds,
		SegmentTokens: p.SegmentTokens, FP16: p.FP16, EmotionTextModel: p.EmotionTextModel, ShareWeights: p.ShareWeights}
}

// StoredProfile converts a profile to be stored with id (0: a new one).
func StoredProfile(id int64, p gpu.Profile) studio.GPUProfile {
	return studio.GPUProfile{ID: id, Name: p.Name, MaxSlots: p.MaxSlots, ReservePct: p.ReservePct,
		LongTextThresholdSec: p.LongTextThresholdSec, LongLaneLimit: p.LongLaneLimit, MaxGenSeconds: p.MaxGenSeconds,
		SegmentTokens: p.SegmentTokens, FP16: p.FP16, EmotionTextModel: p.EmotionTextModel, ShareWeights: p.ShareWeights}
}

// Run works until ctx ends, then waits for the calibrations it started.
func (a *GPUAgent) Run(ctx context.Context) {
	defer a.wg.Wait()
	publish := time.NewTicker(a.cfg.PublishEvery)
	defer publish.Stop()
	settings := time.NewTicker(a.cfg.SettingsEvery)
	defer settings.Stop()
	history := time.NewTicker(time.Minute)
	defer history.Stop()
	prune := time.NewTicker(time.Hour)
	defer prune.Stop()
	a.register(ctx)
	a.Publish(ctx)
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-publish.C:
			if n++; n%15 == 0 {
				a.register(ctx) // again now and then: a re-registration empties the list
			}
			a.Publish(ctx)
		case <-settings.C:
			if err := a.ApplySettings(ctx); err != nil && ctx.Err() == nil {
				a.log.WarnContext(ctx, "reading GPU settings", "err", err)
			}
			a.claim(ctx)
		case <-history.C:
			a.SaveHistory(ctx, time.Now())
		case <-prune.C:
			if _, err := a.store.PruneGPUHistory(ctx, time.Now().Add(-a.cfg.KeepHistory)); err != nil && ctx.Err() == nil {
				a.log.WarnContext(ctx, "pruning GPU history", "err", err)
			}
		}
	}
}

// registeredGPU is a GPU in the worker registry.
type registeredGPU struct {
	Index      int    `json:"index"`
	UUID       string `json:"uuid"`
	Name       string `json:"name"`
	TotalBytes int64  `json:"total_bytes"`
	Simulated  bool   `json:"simulated,omitempty"`
}

func (a *GPUAgent) register(ctx context.Context) {
	var gs []registeredGPU
	for _, d := range a.slots.Devices() {
		gs = append(gs, registeredGPU{Index: d.Index, UUID: d.UUID, Name: d.Name, TotalBytes: d.TotalBytes,
			Simulated: a.slots.cfg.Simulated})
	}
	data, _ := json.Marshal(gs)
	if err := a.store.SetWorkerGPUs(ctx, a.cfg.Worker, data); err != nil && ctx.Err() == nil {
		a.log.WarnContext(ctx, "registering GPUs", "err", err)
	}
}

// Publish stores the live state now.
func (a *GPUAgent) Publish(ctx context.Context) {
	st := a.slots.Live(a.cfg.Recent)
	st.Worker, st.Host = a.cfg.Worker, a.cfg.Host
	data, err := json.Marshal(st)
	if err != nil {
		a.log.ErrorContext(ctx, "encoding the GPU state", "err", err)
		return
	}
	if err := a.store.PublishGPULive(ctx, a.cfg.Worker, a.cfg.Host, data); err != nil && ctx.Err() == nil &&
		!errors.Is(err, studio.ErrNotFound) { // not registered yet: the next round
		a.log.WarnContext(ctx, "publishing the GPU state", "err", err)
	}
}

// SaveHistory stores the per-minute averages and maxima of the minutes that ended
// before now and are not stored yet.
func (a *GPUAgent) SaveHistory(ctx context.Context, now time.Time) {
	cutoff := now.Truncate(time.Minute)
	m := a.slots.Monitor()
	var rows []studio.GPUMinute
	a.mu.Lock()
	for _, d := range a.slots.Devices() {
		var done []gpu.Sample
		for _, smp := range m.History(d.UUID, a.saved[d.UUID]) {
			if smp.Time.Before(cutoff) {
				done = append(done, smp)
			}
		}
		for _, g := range gpu.Downsample(done, time.Minute) {
			rows = append(rows, studio.GPUMinute{Host: a.cfg.Host, GPUUUID: g.UUID, Minute: g.Start, GPUIndex: g.Index,
				Samples: g.Samples, Lost: g.Lost, AvgUsedBytes: g.AvgUsedBytes, MaxUsedBytes: g.MaxUsedBytes,
				TotalBytes: g.TotalBytes, AvgUtil: g.AvgGPUPercent, MaxUtil: g.MaxGPUPercent, AvgTempC: g.AvgTemperatureC,
				MaxTempC: g.MaxTemperatureC, AvgPowerW: g.AvgPowerWatts, MaxPowerW: g.MaxPowerWatts})
		}
	}
	a.mu.Unlock()
	if err := a.store.SaveGPUHistory(ctx, rows); err != nil {
		if ctx.Err() == nil {
			a.log.WarnContext(ctx, "storing GPU history", "err", err)
		}
		return
	}
	a.mu.Lock()
	for _, d := range a.slots.Devices() {
		a.saved[d.UUID] = cutoff
	}
	a.mu.Unlock()
}

// claim takes the calibrations requested for this worker's GPUs and runs each.
func (a *GPUAgent) claim(ctx context.Context) {
	var uuids []string
	for _, d := range a.slots.Devices() {
		uuids = append(uuids, d.UUID)
	}
	cs, err := a.store.ClaimGPUCalibrations(ctx, a.cfg.Worker, uuids)
	if err != nil {
		if ctx.Err() == nil {
			a.log.WarnContext(ctx, "claiming calibrations", "err", err)
		}
		return
	}
	for _, c := range cs {
		a.mu.Lock()
		if a.running[c.ID] {
			a.mu.Unlock()
			continue
		}
		a.running[c.ID] = true
		a.mu.Unlock()
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.calibrate(ctx, c)
			a.mu.Lock()
			delete(a.running, c.ID)
			a.mu.Unlock()
		}()
	}
}

// Progress is a calibration's progress as stored: a catalog message.
type Progress struct {
	Key  string `json:"key"`
	Args []any  `json:"args,omitempty"`
}

func (a *GPUAgent) calibrate(ctx context.Context, c studio.GPUCalibration) {
	log := a.log.With("calibration", c.ID, "gpu", c.GPUUUID)
	finish := func(res *calibrate.Result, err error) {
		var data json.RawMessage
		if res != nil {
			data, _ = json.Marshal(res)
		}
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if ferr := a.store.FinishGPUCalibration(context.WithoutCancel(ctx), c.ID, data, msg); ferr != nil {
			log.ErrorContext(ctx, "storing the calibration", "err", ferr)
		}
	}
	sp, err := c.ProfileValue()
	if err != nil {
		finish(nil, fmt.Errorf("the calibration's profile: %w", err))
		return
	}
	p := ProfileOf(sp)
	if err := p.Validate(); err != nil {
		finish(nil, err)
		return
	}
	log.InfoContext(ctx, "calibrating", "profile", p.Name)
	res, err := a.slots.Calibrate(ctx, c.ID, c.GPUUUID, p, func(key string, args ...any) {
		data, _ := json.Marshal(Progress{Key: key, Args: args})
		if err := a.store.SetGPUCalibrationProgress(ctx, c.ID, string(data)); err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "calibration progress", "err", err)
		}
	})
	if err != nil {
		log.WarnContext(ctx, "calibration failed", "err", err)
	} else {
		log.InfoContext(ctx, "calibrated", "recommended", res.Recommended, "why", res.Verdict.Why)
	}
	finish(res, err)
}
