package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Host is a running model-host process as the pool sees it.
type Host interface {
	CacheReleaser
	// PID is the process id (the one NVML lists).
	PID() int
	// Concurrency is how many requests the host serves at once.
	Concurrency() int
	// Health returns nil while the host answers.
	Health(ctx context.Context) error
	// Exited is closed when the process has exited, for whatever reason (killed by
	// the OS included); ExitErr then says how.
	Exited() <-chan struct{}
	ExitErr() error
	// Stop asks the host to exit and kills it if it has not by the time ctx ends.
	Stop(ctx context.Context) error
	// Kill ends the host at once.
	Kill() error
}

// BatchingHost is a Host that decodes many lines in one process (protocol 2). Batch
// reports what its health said: the memory it holds (weights and the preallocated KV
// pool) and the activation bytes per audio second of one line; ok is false for a
// host that does not batch.
type BatchingHost interface {
	Host
	Batch() (residentBytes int64, lineBytesPerSecond float64, ok bool)
}

// LaunchOpts says what host to start where.
type LaunchOpts struct {
	GPU      string // UUID
	GPUIndex int
	ID       string
	// Env is the environment the host must get on top of the worker's: it pins the
	// process to the GPU (CUDA_VISIBLE_DEVICES=<uuid>, CUDA_DEVICE_ORDER=PCI_BUS_ID).
	Env []string
	// Weights says whether the host loads its own weights (""), loads them and lends
	// them to the GPU's other hosts, or maps the lender's (Profile.ShareWeights).
	Weights WeightsRole
}

// WeightsRole is a host's part in sharing one copy of the weights on a GPU.
type WeightsRole string

// Weights roles.
const (
	WeightsOwn    WeightsRole = ""
	WeightsLend   WeightsRole = "lend"
	WeightsBorrow WeightsRole = "borrow"
)

// HostLauncher starts model hosts. Launch returns once the host serves (or fails).
type HostLauncher interface {
	Launch(ctx context.Context, opts LaunchOpts) (Host, error)
}

// DefaultStartTimeout is how long a host may take to serve when PoolConfig (or a
// caller of LaunchPinned) names no bound.
const DefaultStartTimeout = 10 * time.Minute

// LaunchPinned launches a host on opts.GPU alone (CUDA sees that card only, by PCI
// order) and gives it at most within (DefaultStartTimeout when 0) to serve: a host
// not ready by then is killed by the launcher and the error says so. The pool and
// the calibrations start their hosts through it.
func LaunchPinned(ctx context.Context, l HostLauncher, opts LaunchOpts, within time.Duration) (Host, error) {
	if within <= 0 {
		within = DefaultStartTimeout
	}
	opts.Env = append(slices.Clip(opts.Env), "CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES="+opts.GPU)
	lctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	h, err := l.Launch(lctx, opts)
	if err != nil && ctx.Err() == nil && errors.Is(lctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("not ready within %s: %w", within, err)
	}
	return h, err
}

// HostRegistry is what the pool tells about its hosts; *Executor implements it.
type HostRegistry interface {
	AddHost(ctx context.Context, uuid string, spec HostSpec) error
	HostReady(uuid, id string, r ReadyHost) error
	DrainHost(uuid, id string) (<-chan struct{}, error)
	RemoveHost(uuid, id string, cause error)
}

// HostEventKind names what happened to a pool's host.
type HostEventKind string

// Host events.
const (
	EventStarted      HostEventKind = "started"
	EventLaunchFailed HostEventKind = "launch_failed"
	EventExited       HostEventKind = "exited"    // died on its own or was killed by the OS
	EventUnhealthy    HostEventKind = "unhealthy" // failed its health checks and was killed
	EventStopped      HostEventKind = "stopped"   // stopped by the pool (resize, shutdown)
)

// HostEvent reports a change of one of the pool's hosts.
type HostEvent struct {
	GPU      string
	ID       string
	PID      int
	Kind     HostEventKind
	Err      error
	Restarts int
}

// PoolConfig configures NewPool.
type PoolConfig struct {
	GPU      string // UUID
	GPUIndex int
	Launcher HostLauncher
	Registry HostRegistry
	// ModelBytes is the expected memory of one host; 0: the executor's calibration.
	ModelBytes int64
	// HealthInterval between health checks; default 5 s. HealthTimeout bounds one;
	// default 5 s. HealthFailures in a row get the host killed and restarted;
	// default 3.
	HealthInterval time.Duration
	HealthTimeout  time.Duration
	HealthFailures int
	// RestartBackoff is the first wait before restarting a host that died; it
	// doubles while hosts die within MinUptime of starting, up to MaxBackoff.
	// Defaults 1 s, 1 min, 1 min.
	RestartBackoff, MaxBackoff, MinUptime time.Duration
	// StopTimeout bounds a graceful stop before the host is killed; default 30 s.
	StopTimeout time.Duration
	// StartTimeout bounds a launch, from the process's start to its first healthy
	// answer (the model loaded); a host not ready by then is killed and started
	// again after the backoff. Default DefaultStartTimeout, 10 min: IndexTTS loads in
	// about a minute, but a first start may compile kernels, and a host that hangs (a
	// download the offline install should have made, a lock) must not hold its seat
	// for ever.
	StartTimeout time.Duration
	// ProcessMemory returns NVML's reading for a PID on this GPU (the monitor's
	// ProcessBytes); optional.
	ProcessMemory func(pid int) (int64, bool)
	// OnEvent, if set, is called for every host event, from the pool's goroutines.
	OnEvent func(HostEvent)
	Logger  *slog.Logger
	Now     func() time.Time
}

// Pool keeps a GPU's model hosts running: one per seat, each started with the GPU
// pinned, health-checked, and restarted when it dies (an OS kill included) or stops
// answering. Resize adds hosts at once and drains extra ones before stopping them.
//
// With shared weights (SetShareWeights), seat 0's host lends the weights and the
// others borrow them: a borrower starts once the lender serves, is killed (and
// restarted, to borrow from the next lender) when the lender ends, and a retiring
// lender waits until its borrowers are gone.
type Pool struct {
	cfg PoolConfig

	mu       sync.Mutex
	ctx      context.Context
	seats    []*poolSeat // the wanted seats, by index
	retiring []*poolSeat
	wg       sync.WaitGroup
	started  bool
	share    bool
	lending  *lending // the current lender's, while share is on
}

// lending is one lender host's life: up is closed when it serves, gone when it has
// ended (or failed to start).
type lending struct {
	up, gone chan struct{}
}

func newLending() *lending { return &lending{up: make(chan struct{}), gone: make(chan struct{})} }

type poolSeat struct {
	index int
	id    string
	stop  chan struct{} // closed to drain and stop the host for good

	mu        sync.Mutex
	host      Host
	role      WeightsRole // the current host's
	state     HostState
	restarts  int
	lastErr   error
	startedAt time.Time
}

// HostStatus is one of the pool's hosts, for the admin page.
type HostStatus struct {
	ID        string
	Index     int
	PID       int
	State     HostState
	Restarts  int
	LastError string
	StartedAt time.Time
	// Weights is the host's part in sharing the weights.
	Weights WeightsRole
	// ResidentBytes is NVML's reading for the process (0 if unknown).
	ResidentBytes int64
}

// NewPool checks the configuration and returns a pool with no hosts; Start it.
func NewPool(cfg PoolConfig) (*Pool, error) {
	if cfg.Launcher == nil || cfg.Registry == nil || cfg.GPU == "" {
		return nil, fmt.Errorf("gpu pool: launcher, registry and GPU are required: %w", ErrInvalid)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.HealthInterval, 5*time.Second)
	def(&cfg.HealthTimeout, 5*time.Second)
	def(&cfg.RestartBackoff, time.Second)
	def(&cfg.MaxBackoff, time.Minute)
	def(&cfg.MinUptime, time.Minute)
	def(&cfg.StopTimeout, 30*time.Second)
	def(&cfg.StartTimeout, DefaultStartTimeout)
	if cfg.HealthFailures <= 0 {
		cfg.HealthFailures = 3
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Pool{cfg: cfg}, nil
}

// SetShareWeights sets whether hosts started from now on share one copy of the
// weights. Hosts already running keep their role: restart them (Resize(0), then
// back) to change it.
func (p *Pool) SetShareWeights(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.share = on
	if on && p.lending == nil {
		p.lending = newLending()
	}
}

// weightsRole is the role seat index's next host starts with, and the lending it
// belongs to (nil for a host with its own weights).
func (p *Pool) weightsRole(index int) (WeightsRole, *lending) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.share {
		return WeightsOwn, nil
	}
	return Profile{ShareWeights: true}.WeightsRole(index), p.lending
}

// endLending marks lender l as ended: its borrowers are killed, and the next host
// of seat 0 lends anew.
func (p *Pool) endLending(l *lending) {
	p.mu.Lock()
	if p.lending == l {
		p.lending = newLending()
	}
	p.mu.Unlock()
	closeOnce(l.gone)
}

// borrowersLeft reports whether any seat's host borrows the weights.
func (p *Pool) borrowersLeft() bool {
	p.mu.Lock()
	all := append(append([]*poolSeat(nil), p.seats...), p.retiring...)
	p.mu.Unlock()
	for _, s := range all {
		s.mu.Lock()
		b := s.role == WeightsBorrow && s.state != HostStopped
		s.mu.Unlock()
		if b {
			return true
		}
	}
	return false
}

// Start runs n hosts until ctx ends (then they are stopped without draining) or
// Stop is called.
func (p *Pool) Start(ctx context.Context, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return
	}
	p.started, p.ctx = true, ctx
	p.resizeLocked(n)
}

// Resize sets the number of hosts: new ones start at once; the highest ones are
// drained (their work finishes) and then stopped.
func (p *Pool) Resize(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resizeLocked(n)
}

func (p *Pool) resizeLocked(n int) {
	if !p.started {
		return
	}
	for len(p.seats) < n {
		i := len(p.seats)
		s := &poolSeat{index: i, id: fmt.Sprintf("%s/%d", p.cfg.GPU, i), stop: make(chan struct{}), state: HostStarting}
		p.seats = append(p.seats, s)
		p.wg.Add(1)
		go p.supervise(p.ctx, s)
	}
	for len(p.seats) > max(n, 0) {
		s := p.seats[len(p.seats)-1]
		p.seats = p.seats[:len(p.seats)-1]
		close(s.stop)
		p.retiring = append(p.retiring, s)
	}
}

// Size returns the number of hosts wanted.
func (p *Pool) Size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.seats)
}

// Stop drains and stops every host and waits for them; when ctx ends first the
// remaining hosts are killed.
func (p *Pool) Stop(ctx context.Context) error {
	p.Resize(0)
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		for _, s := range p.retiring {
			if h := s.current(); h != nil {
				_ = h.Kill()
			}
		}
		p.mu.Unlock()
		<-done
		return fmt.Errorf("stopping the hosts of GPU %s: %w", p.cfg.GPU, ctx.Err())
	}
}

// Status lists the hosts, those being retired included.
func (p *Pool) Status() []HostStatus {
	p.mu.Lock()
	all := append(append([]*poolSeat(nil), p.seats...), p.retiring...)
	p.mu.Unlock()
	out := make([]HostStatus, 0, len(all))
	for _, s := range all {
		s.mu.Lock()
		st := HostStatus{ID: s.id, Index: s.index, State: s.state, Restarts: s.restarts, StartedAt: s.startedAt,
			Weights: s.role}
		if s.lastErr != nil {
			st.LastError = s.lastErr.Error()
		}
		if s.host != nil {
			st.PID = s.host.PID()
		}
		s.mu.Unlock()
		if st.PID != 0 && p.cfg.ProcessMemory != nil {
			st.ResidentBytes, _ = p.cfg.ProcessMemory(st.PID)
		}
		if st.State == HostStopped {
			continue
		}
		out = append(out, st)
	}
	return out
}

// Serving returns the hosts that serve now, in seat order (those being retired
// left out): what the GPU page asks for a batching host's batch.
func (p *Pool) Serving() []Host {
	p.mu.Lock()
	seats := append([]*poolSeat(nil), p.seats...)
	p.mu.Unlock()
	var out []Host
	for _, s := range seats {
		s.mu.Lock()
		if s.host != nil && s.state == HostServing {
			out = append(out, s.host)
		}
		s.mu.Unlock()
	}
	return out
}

// HostStopped is the state of a retired host that is gone; Status leaves it out.
const HostStopped HostState = "stopped"

func (s *poolSeat) current() Host {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.host
}

func (s *poolSeat) set(h Host, state HostState, err error, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.host, s.state = h, state
	if h == nil && state != HostStarting {
		s.role = WeightsOwn
	}
	if err != nil {
		s.lastErr = err
	}
	if state == HostServing {
		s.startedAt = now
	}
}

func (p *Pool) event(s *poolSeat, pid int, kind HostEventKind, err error) {
	s.mu.Lock()
	restarts := s.restarts
	s.mu.Unlock()
	log := p.cfg.Logger.With("gpu", p.cfg.GPU, "host", s.id, "pid", pid)
	switch kind {
	case EventExited, EventUnhealthy, EventLaunchFailed:
		log.Warn("model host "+string(kind), "error", err, "restarts", restarts)
	default:
		log.Info("model host " + string(kind))
	}
	if p.cfg.OnEvent != nil {
		p.cfg.OnEvent(HostEvent{GPU: p.cfg.GPU, ID: s.id, PID: pid, Kind: kind, Err: err, Restarts: restarts})
	}
}

// supervise keeps seat s's host running until s is retired or ctx ends.
func (p *Pool) supervise(ctx context.Context, s *poolSeat) {
	defer p.wg.Done()
	defer func() {
		s.set(nil, HostStopped, nil, time.Time{})
		p.mu.Lock()
		for i, r := range p.retiring {
			if r == s {
				p.retiring = append(p.retiring[:i], p.retiring[i+1:]...)
				break
			}
		}
		p.mu.Unlock()
	}()
	// stopCtx ends when the seat is retired or the pool's context ends: it bounds
	// every wait except a draining host's.
	stopCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-stopCtx.Done():
		}
	}()

	backoff := p.cfg.RestartBackoff
	for stopCtx.Err() == nil {
		up, err := p.runOnce(ctx, stopCtx, s)
		if err == nil { // retired or shut down
			return
		}
		s.mu.Lock()
		s.restarts++
		s.mu.Unlock()
		if up >= p.cfg.MinUptime {
			backoff = p.cfg.RestartBackoff
		}
		t := time.NewTimer(backoff)
		select {
		case <-stopCtx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, p.cfg.MaxBackoff)
	}
}

// runOnce starts the seat's host and watches it. It returns nil when the host was
// stopped on purpose, or why it ended and how long it served.
func (p *Pool) runOnce(ctx, stopCtx context.Context, s *poolSeat) (time.Duration, error) {
	uuid := p.cfg.GPU
	s.set(nil, HostStarting, nil, time.Time{})
	role, lend := p.weightsRole(s.index)
	if role == WeightsBorrow {
		// A borrower starts once a lender serves (one that ended before is replaced
		// by the next).
		for ready := false; !ready; {
			select {
			case <-lend.up:
				ready = true
			case <-lend.gone:
				role, lend = p.weightsRole(s.index)
				if role != WeightsBorrow {
					ready = true
				}
			case <-stopCtx.Done():
				return 0, nil
			}
		}
	}
	// gone is closed when the lender whose weights this host maps has ended; never
	// for a host with weights of its own.
	var gone <-chan struct{}
	switch role {
	case WeightsLend:
		defer p.endLending(lend)
	case WeightsBorrow:
		gone = lend.gone
	}
	s.mu.Lock()
	s.role = role
	s.mu.Unlock()
	if err := p.cfg.Registry.AddHost(stopCtx, uuid, HostSpec{ID: s.id, Order: s.index, ModelBytes: p.cfg.ModelBytes,
		Borrows: role == WeightsBorrow}); err != nil {
		if stopCtx.Err() != nil {
			return 0, nil
		}
		return 0, fmt.Errorf("registering host %s: %w", s.id, err)
	}
	host, err := LaunchPinned(stopCtx, p.cfg.Launcher, LaunchOpts{GPU: uuid, GPUIndex: p.cfg.GPUIndex, ID: s.id, Weights: role},
		p.cfg.StartTimeout)
	if err != nil {
		p.cfg.Registry.RemoveHost(uuid, s.id, nil)
		if stopCtx.Err() != nil {
			return 0, nil
		}
		err = fmt.Errorf("launching host %s: %w", s.id, err)
		s.set(nil, HostStarting, err, time.Time{})
		p.event(s, 0, EventLaunchFailed, err)
		return 0, err
	}
	pid := host.PID()
	started := p.cfg.Now()
	ready := ReadyHost{PID: pid, Concurrency: host.Concurrency(), Releaser: host, Handle: host}
	if bh, ok := host.(BatchingHost); ok {
		if resident, rate, batching := bh.Batch(); batching {
			ready.ModelBytes, ready.LineBytesPerSecond = resident, rate
		}
	}
	if err := p.cfg.Registry.HostReady(uuid, s.id, ready); err != nil {
		_ = host.Kill()
		<-host.Exited()
		p.cfg.Registry.RemoveHost(uuid, s.id, nil)
		return 0, fmt.Errorf("registering host %s as ready: %w", s.id, err)
	}
	s.set(host, HostServing, nil, started)
	p.event(s, pid, EventStarted, nil)
	if role == WeightsLend {
		close(lend.up)
	}

	// died ends the host after a failure: it is removed, and the seat restarts it.
	died := func(kind HostEventKind, err error) (time.Duration, error) {
		p.cfg.Registry.RemoveHost(uuid, s.id, err)
		s.set(nil, HostDead, err, time.Time{})
		p.event(s, pid, kind, err)
		return p.cfg.Now().Sub(started), err
	}
	tick := time.NewTicker(p.cfg.HealthInterval)
	defer tick.Stop()
	failures := 0
	for {
		select {
		case <-host.Exited():
			err := host.ExitErr()
			if err == nil {
				err = errors.New("exited")
			}
			return died(EventExited, fmt.Errorf("host %s (pid %d) died: %w", s.id, pid, err))

		case <-gone:
			// The weights it maps are gone with their lender.
			_ = host.Kill()
			<-host.Exited()
			if stopCtx.Err() != nil {
				p.cfg.Registry.RemoveHost(uuid, s.id, nil)
				p.event(s, pid, EventStopped, nil)
				return 0, nil
			}
			return died(EventExited, fmt.Errorf("host %s (pid %d) killed: %w", s.id, pid, ErrLenderGone))

		case <-tick.C:
			hctx, cancel := context.WithTimeout(stopCtx, p.cfg.HealthTimeout)
			herr := host.Health(hctx)
			cancel()
			if herr == nil {
				failures = 0
				continue
			}
			if stopCtx.Err() != nil {
				continue // shutting down: the next case handles it
			}
			failures++
			if failures < p.cfg.HealthFailures {
				continue
			}
			_ = host.Kill()
			<-host.Exited()
			return died(EventUnhealthy, fmt.Errorf("host %s (pid %d) failed %d health checks: %w", s.id, pid, failures, herr))

		case <-s.stop:
			// Retired: let its work finish unless the pool is shutting down.
			s.set(host, HostDraining, nil, started)
			if drained, err := p.cfg.Registry.DrainHost(uuid, s.id); err == nil {
				select {
				case <-drained:
				case <-ctx.Done():
				case <-host.Exited():
				}
			}
			if role == WeightsLend {
				p.awaitBorrowers(ctx, host)
			}
			p.stopHost(host)
			p.cfg.Registry.RemoveHost(uuid, s.id, nil)
			p.event(s, pid, EventStopped, nil)
			return 0, nil

		case <-ctx.Done():
			p.stopHost(host)
			p.cfg.Registry.RemoveHost(uuid, s.id, nil)
			p.event(s, pid, EventStopped, nil)
			return 0, nil
		}
	}
}

// awaitBorrowers waits until no host borrows the weights of lender (they drain
// before it stops), or until the pool shuts down or the lender exits.
func (p *Pool) awaitBorrowers(ctx context.Context, lender Host) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for p.borrowersLeft() {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		case <-lender.Exited():
			return
		}
	}
}

func (p *Pool) stopHost(h Host) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.StopTimeout)
	defer cancel()
	if err := h.Stop(ctx); err != nil {
		_ = h.Kill()
	}
	<-h.Exited()
}
