package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"dubstudio/i18n"
)

// Lane separates long requests, which get their own (lower) concurrency limit, from
// normal ones.
type Lane int

// Lanes.
const (
	LaneNormal Lane = iota
	LaneLong
)

func (l Lane) String() string {
	if l == LaneLong {
		return "long"
	}
	return "normal"
}

// SafetyConfig tunes the safety factor that multiplies predicted peaks.
type SafetyConfig struct {
	// Initial factor; default 1.0 (calibration already keeps the worst run).
	Initial float64
	// OOMMultiplier raises the factor after an out-of-memory error; default 1.25.
	OOMMultiplier float64
	// Max caps the factor; default 2.0.
	Max float64
	// DecayEvery is the number of clean runs in a row after which the factor decays
	// one step; default 20.
	DecayEvery int
	// DecayStep is the share of the excess over 1.0 removed per step; default 0.25.
	DecayStep float64
}

func (s SafetyConfig) withDefaults() SafetyConfig {
	if s.Initial < 1 {
		s.Initial = 1
	}
	if s.OOMMultiplier <= 1 {
		s.OOMMultiplier = 1.25
	}
	if s.Max < s.Initial {
		s.Max = max(2, s.Initial)
	}
	if s.DecayEvery <= 0 {
		s.DecayEvery = 20
	}
	if s.DecayStep <= 0 || s.DecayStep > 1 {
		s.DecayStep = 0.25
	}
	return s
}

// ExecutorConfig configures NewExecutor.
type ExecutorConfig struct {
	Logger *slog.Logger
	Safety SafetyConfig
	// ReleaseTimeout bounds one ReleaseCache call; default 30 s.
	ReleaseTimeout time.Duration
	// ForeignWindow is how many samples the estimate of foreign memory keeps the
	// maximum over, so that a momentary dip is not trusted; default 5.
	ForeignWindow int
	// Now is the clock; default time.Now. Monitor samples must use the same clock.
	Now func() time.Time
}

// GPUConfig describes one GPU the executor schedules on.
type GPUConfig struct {
	UUID        string
	Index       int
	Name        string
	TotalBytes  int64
	Profile     Profile
	Calibration Calibration
}

// CacheReleaser is the one thing the executor asks of a model host: give the
// caching allocator's unused reserve back to the device (torch.cuda.empty_cache) and
// report the reserve that is left.
type CacheReleaser interface {
	ReleaseCache(ctx context.Context) (cachedAfter int64, err error)
}

// HostSpec registers a model host with the executor before it starts.
type HostSpec struct {
	// ID is unique on its GPU.
	ID string
	// Order places the host among the GPU's seats (lowest first); hosts whose seats
	// are above the profile's Concurrency take no work. The pool uses its seat index.
	Order int
	// ModelBytes is the memory the host holds after load; 0 means the GPU's
	// calibrated resident size, or its borrower's size for a host that Borrows.
	ModelBytes int64
	// Borrows: the host maps another host's weights (Profile.ShareWeights).
	Borrows bool
}

// ReadyHost describes a started host.
type ReadyHost struct {
	// PID is the process NVML lists for the host.
	PID int
	// Concurrency is how many requests the host serves at once; default 1.
	Concurrency int
	// ModelBytes is what the host reports it holds (a batching host's weights and
	// KV pool, preallocated at load); 0 keeps the prediction it was added with.
	ModelBytes int64
	// LineBytesPerSecond is a batching host's predicted activation bytes per audio
	// second of one line (protocol 2, batch.activation_bytes_per_second). Set, and the
	// GPU uncalibrated, lines on the GPU are admitted by it alone: their KV is in
	// ModelBytes.
	LineBytesPerSecond float64
	// Releaser empties the host's cache; nil if the host cannot.
	Releaser CacheReleaser
	// Handle is handed back on leases for this host (the caller's client for it).
	Handle any
}

// Request asks for a seat to synthesize one line.
type Request struct {
	// ID names the work in snapshots and logs ("line 12", "speaker preparation").
	ID string
	// LineID is the line the work renders (0: none, a speaker preparation), so that
	// a page can link the seat to its line without parsing ID.
	LineID int64
	// AudioSeconds is the predicted length of the speech, from the line's slot.
	AudioSeconds float64
	// First: an editor's retake. It waits ahead of the requests that are not, behind
	// the other first ones.
	First bool
}

// Outcome is what happened to a leased request.
type Outcome struct {
	// PeakBytes is the measured extra peak of the request (the allocator's peak
	// minus the model); 0 if unknown.
	PeakBytes int64
	// OOM: the request failed with CUDA out of memory.
	OOM bool
	// HostDied: the host died while serving the request.
	HostDied bool
	// CachedAfter is the host's allocator reserve beyond the model after the request
	// (torch.cuda.memory_reserved minus the model); 0 if unknown, in which case the
	// reserve is assumed to have grown to the request's peak.
	CachedAfter int64
	// NotRun: the request was never sent (the caller gave up); nothing is learnt.
	NotRun bool
}

// RetryReason says why a leased request must be run again.
type RetryReason string

// Retry reasons.
const (
	ReasonGPULost     RetryReason = "gpu_lost"
	ReasonHostDied    RetryReason = "host_died"
	ReasonOutOfMemory RetryReason = "out_of_memory"
	ReasonNoGPU       RetryReason = "no_gpu"
	ReasonClosed      RetryReason = "closed"
)

// RetryableError is returned for work that did not complete for a reason that is
// not its own; it unwraps to ErrRetryable (and to ErrGPULost or ErrNoGPU where
// that is the cause). The caller runs the work again, elsewhere if the GPU is lost.
type RetryableError struct {
	Reason RetryReason
	GPU    string
	Err    error
}

func (e *RetryableError) Error() string {
	s := fmt.Sprintf("gpu: retryable (%s)", e.Reason)
	if e.GPU != "" {
		s += " on " + e.GPU
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrRetryable and the cause.
func (e *RetryableError) Unwrap() []error {
	errs := []error{ErrRetryable}
	switch e.Reason {
	case ReasonGPULost:
		errs = append(errs, ErrGPULost)
	case ReasonNoGPU:
		errs = append(errs, ErrNoGPU)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// MessageKey is the i18n key of the user-facing text; its one argument is GPU.
func (e *RetryableError) MessageKey() string {
	switch e.Reason {
	case ReasonGPULost:
		return "gpu.error.lost"
	case ReasonHostDied:
		return "gpu.error.host_died"
	case ReasonOutOfMemory:
		return "gpu.error.out_of_memory"
	default:
		return "gpu.error.no_gpu"
	}
}

// In returns the user-facing text in lang.
func (e *RetryableError) In(lang i18n.Lang) string {
	key := e.MessageKey()
	if key == "gpu.error.no_gpu" {
		return i18n.T(lang, key)
	}
	return i18n.T(lang, key, e.GPU)
}

// IsRetryable reports whether err is work to run again.
func IsRetryable(err error) bool { return errors.Is(err, ErrRetryable) }

// NeverFitsError refuses a request that cannot run on any GPU as configured: too
// long for every profile's MaxGenSeconds (split it with SplitText), or a predicted
// peak larger than any GPU can give. It unwraps to ErrNeverFits.
type NeverFitsError struct {
	AudioSeconds float64
	// TooLong: longer than LimitSeconds, the largest MaxGenSeconds of the GPUs.
	TooLong      bool
	LimitSeconds float64
	// NeedBytes is the predicted peak and MaxBytes the most any GPU could give it.
	NeedBytes, MaxBytes int64
}

func (e *NeverFitsError) Error() string {
	if e.TooLong {
		return fmt.Sprintf("gpu: a %.1f s request is longer than the %.1f s limit", e.AudioSeconds, e.LimitSeconds)
	}
	return fmt.Sprintf("gpu: a %.1f s request needs %d bytes, at most %d are ever available",
		e.AudioSeconds, e.NeedBytes, e.MaxBytes)
}

// Unwrap returns ErrNeverFits.
func (e *NeverFitsError) Unwrap() error { return ErrNeverFits }

// MessageKey and MessageArgs give the user-facing text.
func (e *NeverFitsError) MessageKey() string {
	if e.TooLong {
		return "gpu.request.too_long"
	}
	return "gpu.request.never_fits"
}

// MessageArgs are the arguments of MessageKey's message.
func (e *NeverFitsError) MessageArgs() []any {
	if e.TooLong {
		return []any{e.AudioSeconds, e.LimitSeconds}
	}
	return []any{gb(e.NeedBytes), e.AudioSeconds, gb(max(e.MaxBytes, 0))}
}

// In returns the user-facing text in lang.
func (e *NeverFitsError) In(lang i18n.Lang) string {
	return i18n.T(lang, e.MessageKey(), e.MessageArgs()...)
}

// Executor admits synthesis requests onto GPUs under each GPU's VRAM budget.
//
// Per GPU, budget = total × (1 − reserve) − memory of processes that are not ours.
// Committed = for every host, its model memory plus the larger of its allocator's
// cached reserve and the predicted peaks of its requests in flight (a PyTorch
// process reuses its own cache before asking the device for more), plus nothing
// else. A request is admitted when committed plus the growth it causes stays within
// the budget, a seat is idle and its lane has room; otherwise it waits in FIFO order
// (a request that cannot be admitted holds back later requests for the same GPUs, so
// long lines are not starved by short ones). When cached reserves are what blocks it,
// idle hosts are asked to release them.
type Executor struct {
	cfg ExecutorConfig
	log *slog.Logger

	mu       sync.Mutex
	gpus     []*gpuState
	queue    []*waiter
	seq      uint64
	closed   bool
	counters Counters

	waitHook func(Request) // tests: called when a request starts waiting
}

type gpuState struct {
	uuid, name  string
	index       int
	total       int64
	profile     Profile
	cal         Calibration
	factor      float64
	cleanStreak int
	foreignHist *ring[int64]
	foreign     int64
	nvmlUsed    int64
	lost        bool
	hosts       []*hostState
	running     int
	longRunning int
	releasing   int // cache releases in flight
	// lineRate is the activation bytes per audio second its last ready batching host
	// reported (ReadyHost.LineBytesPerSecond); 0 for process hosts.
	lineRate float64
	c        GPUCounters
}

type hostState struct {
	spec     HostSpec
	pid      int
	releaser CacheReleaser
	handle   any
	model    int64
	cached   int64
	inflight int64 // sum of predicted peaks of its leases
	busy     []*Lease
	placed   bool // its model memory is counted (start admitted)
	ready    bool // serving
	draining bool
	dead     bool
	drained  chan struct{}
	// pristine: no request since start or since its cache was released, so an idle
	// NVML reading is the model alone.
	pristine  bool
	releasing bool
	noRelease bool // the last release failed: don't ask again until it serves a request
	changedAt time.Time
	nvmlBytes int64
}

func (h *hostState) committed() int64 {
	if !h.placed {
		return 0
	}
	return h.model + max(h.cached, h.inflight)
}

func (h *hostState) nBusy() int {
	n := 0
	for _, l := range h.busy {
		if l != nil {
			n++
		}
	}
	return n
}

type waiter struct {
	seq   uint64
	req   Request
	host  *hostState // set for a host start, which waits for its model's memory
	gpu   *gpuState  // the host's GPU
	since time.Time
	ready chan placement
}

type placement struct {
	lease *Lease
	err   error
}

// NewExecutor returns an executor without GPUs; add them with AddGPU.
func NewExecutor(cfg ExecutorConfig) *Executor {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ReleaseTimeout <= 0 {
		cfg.ReleaseTimeout = 30 * time.Second
	}
	if cfg.ForeignWindow <= 0 {
		cfg.ForeignWindow = 5
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Safety = cfg.Safety.withDefaults()
	return &Executor{cfg: cfg, log: cfg.Logger}
}

// AddGPU adds a GPU. Its profile must be valid.
func (e *Executor) AddGPU(g GPUConfig) error {
	if err := g.Profile.Validate(); err != nil {
		return fmt.Errorf("adding GPU %s: %w", g.UUID, err)
	}
	if g.TotalBytes <= 0 {
		return fmt.Errorf("adding GPU %s: total memory unknown: %w", g.UUID, ErrInvalid)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gpuLocked(g.UUID) != nil {
		return fmt.Errorf("adding GPU %s: already added: %w", g.UUID, ErrInvalid)
	}
	e.gpus = append(e.gpus, &gpuState{
		uuid: g.UUID, name: g.Name, index: g.Index, total: g.TotalBytes, profile: g.Profile,
		cal: g.Calibration, factor: e.cfg.Safety.Initial, foreignHist: newRing[int64](e.cfg.ForeignWindow),
	})
	e.dispatchLocked()
	return nil
}

func (e *Executor) gpuLocked(uuid string) *gpuState {
	for _, g := range e.gpus {
		if g.uuid == uuid {
			return g
		}
	}
	return nil
}

func (e *Executor) gpu(uuid string) (*gpuState, error) {
	g := e.gpuLocked(uuid)
	if g == nil {
		return nil, fmt.Errorf("GPU %s: %w", uuid, ErrInvalid)
	}
	return g, nil
}

// SetProfile changes a GPU's profile live. Seats above a lower Concurrency take no new
// work (the pool stops their hosts once idle); more seats are used as soon as hosts
// serve them.
func (e *Executor) SetProfile(uuid string, p Profile) error {
	if err := p.Validate(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	g, err := e.gpu(uuid)
	if err != nil {
		return err
	}
	g.profile = p
	e.log.Info("GPU profile changed", "gpu", uuid, "profile", p.Name, "concurrency", p.Concurrency)
	e.dispatchLocked()
	return nil
}

// Profile returns a GPU's current profile.
func (e *Executor) Profile(uuid string) (Profile, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	g, err := e.gpu(uuid)
	if err != nil {
		return Profile{}, err
	}
	return g.profile, nil
}

// SetCalibration replaces a GPU's prediction curve.
func (e *Executor) SetCalibration(uuid string, c Calibration) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	g, err := e.gpu(uuid)
	if err != nil {
		return err
	}
	g.cal = c
	e.dispatchLocked()
	return nil
}

// MarkLost marks a GPU lost: its leases in flight fail with a RetryableError
// (ReasonGPULost) and nothing is admitted on it again.
func (e *Executor) MarkLost(uuid string, cause error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	g := e.gpuLocked(uuid)
	if g == nil || g.lost {
		return
	}
	g.lost = true
	e.log.Error("GPU lost", "gpu", uuid, "error", cause)
	for _, h := range g.hosts {
		for _, l := range h.busy {
			if l != nil {
				e.detachLocked(l, &RetryableError{Reason: ReasonGPULost, GPU: uuid, Err: cause})
			}
		}
	}
	e.dispatchLocked()
}

// Observe feeds a monitor sample of one of the executor's GPUs: it updates foreign
// memory, the hosts' readings, and marks the GPU lost if the sample says so.
func (e *Executor) Observe(s Sample) {
	if s.Lost {
		e.MarkLost(s.UUID, ErrGPULost)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	g := e.gpuLocked(s.UUID)
	if g == nil || g.lost || !s.Has(MetricMemory) {
		return
	}
	if s.TotalBytes > 0 {
		g.total = s.TotalBytes
	}
	g.nvmlUsed = s.TotalBytes - s.FreeBytes
	var ours int64
	for _, h := range g.hosts {
		if h.pid == 0 {
			continue
		}
		used, ok := s.ProcessBytes(h.pid)
		if !ok {
			continue
		}
		ours += used
		h.nvmlBytes = used
		if !h.ready || !s.Time.After(h.changedAt) {
			continue // a reading older than the host's last change says nothing new
		}
		switch {
		case h.inflight > 0:
			h.cached = max(h.cached, used-h.model)
		case h.pristine || used < h.model:
			h.model, h.cached = used, 0
		default:
			h.cached = used - h.model
		}
	}
	g.foreignHist.push(max(g.nvmlUsed-ours, 0))
	g.foreign = slices.Max(g.foreignHist.items())
	e.dispatchLocked()
}

// ForgetForeign drops a GPU's estimate of the memory other processes hold, so that
// the next sample alone sets it: for when processes that were not the executor's
// but were known to be temporary (a calibration's hosts) are gone.
func (e *Executor) ForgetForeign(uuid string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if g := e.gpuLocked(uuid); g != nil {
		g.foreignHist.reset()
		g.foreign = 0
	}
}

// AddHost registers a host on a GPU before it is started, and waits until its model
// memory fits the budget (asking idle hosts to release their caches if that helps);
// from then on the memory is counted. Start the process, then call HostReady, or
// RemoveHost if it failed.
func (e *Executor) AddHost(ctx context.Context, uuid string, spec HostSpec) error {
	e.mu.Lock()
	g, err := e.gpu(uuid)
	if err != nil {
		e.mu.Unlock()
		return err
	}
	for _, h := range g.hosts {
		if h.spec.ID == spec.ID {
			e.mu.Unlock()
			return fmt.Errorf("host %s on GPU %s: already added: %w", spec.ID, uuid, ErrInvalid)
		}
	}
	model := spec.ModelBytes
	switch {
	case model > 0:
	case spec.Borrows:
		model = g.cal.Borrower()
	case g.profile.Batching:
		model = BatchResident(g.profile, g.cal, g.total, g.foreign)
	default:
		model = g.cal.Resident()
	}
	h := &hostState{spec: spec, model: model, busy: make([]*Lease, 1), pristine: true}
	at, _ := slices.BinarySearchFunc(g.hosts, spec.Order+1, func(h *hostState, order int) int {
		return h.spec.Order - order
	})
	g.hosts = slices.Insert(g.hosts, at, h)
	w := e.enqueueLocked(Request{ID: "host " + spec.ID}, h, g)
	e.mu.Unlock()

	select {
	case p := <-w.ready:
		if p.err != nil {
			e.RemoveHost(uuid, spec.ID, nil)
		}
		return p.err
	case <-ctx.Done():
		e.mu.Lock()
		e.removeWaiterLocked(w)
		e.mu.Unlock()
		e.RemoveHost(uuid, spec.ID, nil)
		return fmt.Errorf("waiting for memory to start host %s: %w", spec.ID, ctx.Err())
	}
}

// HostReady marks a started host as serving.
func (e *Executor) HostReady(uuid, id string, r ReadyHost) error {
	if r.Concurrency <= 0 {
		r.Concurrency = 1
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	h, err := e.hostLocked(uuid, id)
	if err != nil {
		return err
	}
	g := e.gpuLocked(uuid)
	if !h.placed {
		return fmt.Errorf("host %s on GPU %s is ready before AddHost returned: %w", id, uuid, ErrInvalid)
	}
	h.ready, h.pid, h.changedAt = true, r.PID, e.cfg.Now()
	h.releaser, h.handle = r.Releaser, r.Handle
	if r.ModelBytes > 0 {
		h.model = r.ModelBytes
	}
	g.lineRate = r.LineBytesPerSecond
	if h.nBusy() == 0 {
		h.busy = make([]*Lease, r.Concurrency)
	}
	e.dispatchLocked()
	return nil
}

func (e *Executor) hostLocked(uuid, id string) (*hostState, error) {
	g, err := e.gpu(uuid)
	if err != nil {
		return nil, err
	}
	for _, h := range g.hosts {
		if h.spec.ID == id {
			return h, nil
		}
	}
	return nil, fmt.Errorf("host %s on GPU %s: %w", id, uuid, ErrInvalid)
}

// DrainHost stops admitting work to a host; the channel closes when it has none.
func (e *Executor) DrainHost(uuid, id string) (<-chan struct{}, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h, err := e.hostLocked(uuid, id)
	if err != nil {
		return nil, err
	}
	if h.drained == nil {
		h.drained = make(chan struct{})
	}
	h.draining = true
	if h.nBusy() == 0 {
		closeOnce(h.drained)
	}
	return h.drained, nil
}

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// RemoveHost forgets a host (stopped, or dead: cause says why). Its leases in flight
// fail with a RetryableError (ReasonHostDied).
func (e *Executor) RemoveHost(uuid, id string, cause error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	g := e.gpuLocked(uuid)
	if g == nil {
		return
	}
	i := slices.IndexFunc(g.hosts, func(h *hostState) bool { return h.spec.ID == id })
	if i < 0 {
		return
	}
	h := g.hosts[i]
	for _, l := range h.busy {
		if l != nil {
			e.detachLocked(l, &RetryableError{Reason: ReasonHostDied, GPU: uuid, Err: cause})
		}
	}
	if cause != nil {
		if !h.dead { // a lease that saw it die has counted it
			g.c.HostDeaths++
		}
		e.log.Warn("model host died", "gpu", uuid, "host", id, "pid", h.pid, "error", cause)
	}
	if h.drained != nil {
		closeOnce(h.drained)
	}
	g.hosts = slices.Delete(g.hosts, i, i+1)
	for _, w := range e.queue {
		if w.host == h {
			e.removeWaiterLocked(w)
			w.ready <- placement{err: fmt.Errorf("host %s removed before it started: %w", id, ErrInvalid)}
			break
		}
	}
	e.dispatchLocked()
}

// Close fails every waiting request with a RetryableError (ReasonClosed) and every
// later Acquire too. Leases in flight finish normally.
func (e *Executor) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for _, w := range e.queue {
		w.ready <- placement{err: &RetryableError{Reason: ReasonClosed}}
	}
	e.queue = nil
}

// Lease is an admitted request: it holds a seat on a host and its predicted memory
// until Done. A seat is one place where a synthesis runs: a process host has one,
// a batching host as many as the profile's Concurrency; a GPU's seats are numbered
// from 0 across its hosts, and only the first Concurrency of them take work.
type Lease struct {
	e    *Executor
	g    *gpuState
	h    *hostState
	seat int

	// GPU is the UUID of the GPU, GPUIndex its index.
	GPU      string
	GPUIndex int
	// HostID and HostPID name the host to send the request to; Handle is the host's
	// HostSpec.Handle.
	HostID  string
	HostPID int
	Handle  any
	Lane    Lane
	Request Request
	// PredictedBytes is the peak the request was admitted with, safety factor
	// included; BaseBytes the calibrated prediction without it.
	PredictedBytes, BaseBytes int64
	Admitted                  time.Time

	lost     chan struct{}
	lostErr  error
	detached bool
	done     bool
	result   error
}

// Seat returns the seat number the request runs in, 0-based across the GPU.
func (l *Lease) Seat() int { return l.seat }

// Lost is closed when the lease's GPU is lost or its host removed: stop waiting for
// the host and call Done, which returns the RetryableError.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err returns why the lease was lost, or nil.
func (l *Lease) Err() error {
	l.e.mu.Lock()
	defer l.e.mu.Unlock()
	return l.lostErr
}

// Acquire waits until the request may run on some GPU and returns its lease; the
// caller must call Done. It fails at once with a *NeverFitsError if the request can
// never be admitted, with a RetryableError if there is no GPU, and with ctx's error
// if ctx ends first.
func (e *Executor) Acquire(ctx context.Context, req Request) (*Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, &RetryableError{Reason: ReasonClosed}
	}
	if err := e.checkFitsLocked(req); err != nil {
		if errors.Is(err, ErrNeverFits) {
			e.counters.NeverFits++
		}
		e.mu.Unlock()
		return nil, err
	}
	w := e.enqueueLocked(req, nil, nil)
	waiting := len(w.ready) == 0
	hook := e.waitHook
	e.mu.Unlock()
	if waiting && hook != nil {
		hook(req)
	}

	select {
	case p := <-w.ready:
		return p.lease, p.err
	case <-ctx.Done():
		e.mu.Lock()
		removed := e.removeWaiterLocked(w)
		if removed {
			e.dispatchLocked() // the head may have been holding others back
		}
		e.mu.Unlock()
		if !removed { // admitted meanwhile: give the seat back
			if p := <-w.ready; p.lease != nil {
				_ = p.lease.Done(Outcome{NotRun: true})
			}
		}
		return nil, fmt.Errorf("waiting for a GPU seat for %s: %w", req.ID, ctx.Err())
	}
}

func (e *Executor) enqueueLocked(req Request, h *hostState, g *gpuState) *waiter {
	e.seq++
	w := &waiter{seq: e.seq, req: req, host: h, gpu: g, since: e.cfg.Now(), ready: make(chan placement, 1)}
	i := len(e.queue)
	if req.First {
		i = slices.IndexFunc(e.queue, func(o *waiter) bool { return !o.req.First })
		if i < 0 {
			i = len(e.queue)
		}
	}
	e.queue = slices.Insert(e.queue, i, w)
	e.dispatchLocked()
	return w
}

func (e *Executor) removeWaiterLocked(w *waiter) bool {
	i := slices.Index(e.queue, w)
	if i < 0 {
		return false
	}
	e.queue = slices.Delete(e.queue, i, i+1)
	return true
}

// checkFitsLocked refuses a request no GPU could ever take.
func (e *Executor) checkFitsLocked(req Request) error {
	var alive int
	var limit float64
	var need, most int64 = 0, math.MinInt64
	for _, g := range e.gpus {
		if g.lost {
			continue
		}
		alive++
		limit = max(limit, g.profile.MaxGenSeconds)
		if req.AudioSeconds > g.profile.MaxGenSeconds {
			continue
		}
		p := g.predict(req.AudioSeconds)
		room := g.maxRoom()
		if p <= room {
			return nil
		}
		if room > most {
			need, most = p, room
		}
	}
	if alive == 0 {
		return &RetryableError{Reason: ReasonNoGPU, Err: ErrNoGPU}
	}
	if most == math.MinInt64 {
		return &NeverFitsError{AudioSeconds: req.AudioSeconds, TooLong: true, LimitSeconds: limit}
	}
	return &NeverFitsError{AudioSeconds: req.AudioSeconds, NeedBytes: need, MaxBytes: most}
}

// predict returns the peak a request is admitted with: calibration × safety factor.
func (g *gpuState) predict(seconds float64) int64 {
	return int64(math.Ceil(float64(g.peakBytes(seconds)) * g.factor))
}

// peakBytes is a request's extra peak before the safety factor: the calibration's, or
// on an uncalibrated GPU whose batching host reported it, the line's activations alone
// (its KV is in the host's resident memory).
func (g *gpuState) peakBytes(seconds float64) int64 {
	if g.lineRate > 0 && !g.cal.Calibrated() {
		return int64(math.Ceil(max(seconds, 0) * g.lineRate))
	}
	return g.cal.PeakBytes(seconds)
}

func (g *gpuState) budget() int64 { return g.profile.Budget(g.total, g.foreign) }

// maxRoom is the most one request could ever get: the budget without foreign memory,
// less the models of the hosts that stay (or one host, if there are none).
func (g *gpuState) maxRoom() int64 {
	var models int64
	for _, h := range g.hosts {
		if !h.draining && !h.dead {
			models += h.model
		}
	}
	if models == 0 {
		models = g.cal.Resident()
	}
	return g.profile.Budget(g.total, 0) - models
}

func (g *gpuState) committed() int64 {
	var c int64
	for _, h := range g.hosts {
		c += h.committed()
	}
	return c
}

// seatLayout returns the first seat number of each host that may take work (in
// registration order) and how many of its seats are within Concurrency.
func (g *gpuState) seatLayout() map[*hostState][2]int {
	out := map[*hostState][2]int{}
	next := 0
	for _, h := range g.hosts {
		if h.draining || h.dead {
			continue
		}
		capacity := min(max(g.profile.Concurrency-next, 0), len(h.busy))
		out[h] = [2]int{next, capacity}
		next += len(h.busy)
	}
	return out
}

// gpuStatus is how one GPU stands for one waiter.
type gpuStatus int

const (
	statusOK gpuStatus = iota
	statusIneligible
	statusLane
	statusSeat
	statusMemory
)

type candidate struct {
	g        *gpuState
	h        *hostState
	seat     int
	peak     int64
	base     int64
	headroom int64
	lane     Lane
}

// evaluate says whether w can be admitted on g now, and where.
func (e *Executor) evaluate(w *waiter, g *gpuState) (gpuStatus, candidate) {
	if g.lost {
		return statusIneligible, candidate{}
	}
	budget, committed := g.budget(), g.committed()
	if w.host != nil {
		if w.gpu != g {
			return statusIneligible, candidate{}
		}
		if committed+w.host.model <= budget {
			return statusOK, candidate{g: g, h: w.host, headroom: budget - committed - w.host.model}
		}
		return statusMemory, candidate{g: g, peak: w.host.model}
	}
	s := w.req.AudioSeconds
	if s > g.profile.MaxGenSeconds {
		return statusIneligible, candidate{}
	}
	peak := g.predict(s)
	if peak > g.maxRoom() {
		return statusIneligible, candidate{}
	}
	lane := LaneNormal
	if g.profile.IsLong(s) {
		lane = LaneLong
		if g.longRunning >= g.profile.LongLaneLimit {
			return statusLane, candidate{}
		}
	}
	var best *candidate
	for h, layout := range g.seatLayout() {
		if !h.ready || !h.placed || h.releasing || h.nBusy() >= layout[1] {
			continue
		}
		growth := max(h.cached, h.inflight+peak) - max(h.cached, h.inflight)
		c := candidate{g: g, h: h, peak: peak, base: g.peakBytes(s), lane: lane,
			headroom: budget - committed - growth}
		for k, l := range h.busy {
			if l == nil {
				c.seat = layout[0] + k
				break
			}
		}
		if best == nil || better(c, *best) {
			best = &c
		}
	}
	if best == nil {
		return statusSeat, candidate{}
	}
	if best.headroom < 0 {
		return statusMemory, candidate{g: g, peak: peak}
	}
	return statusOK, *best
}

// better prefers the host where the request grows memory least, then the one with
// the smallest cache (keeping large caches for large requests), then the lowest seat.
func better(a, b candidate) bool {
	if a.headroom != b.headroom {
		return a.headroom > b.headroom
	}
	if a.h.cached != b.h.cached {
		return a.h.cached < b.h.cached
	}
	return a.seat < b.seat
}

// dispatchLocked admits waiters in FIFO order, first requests ahead (enqueueLocked
// places them). A waiter blocked by memory or seats
// on some GPUs keeps later waiters off those GPUs; a waiter blocked only by its lane
// limit does not hold anyone back.
func (e *Executor) dispatchLocked() {
	// blocked: GPUs an earlier waiter is waiting for memory on (closed to everyone
	// behind it); seatBlocked: GPUs with no idle seat for an earlier request (closed
	// to requests, not to host starts, which need no seat).
	blocked := map[*gpuState]bool{}
	seatBlocked := map[*gpuState]bool{}
	for i := 0; i < len(e.queue); {
		w := e.queue[i]
		var best *candidate
		var memBlocked []*gpuState
		eligible := false
		for _, g := range e.gpus {
			st, c := e.evaluate(w, g)
			if st != statusIneligible {
				eligible = true
			}
			if blocked[g] || (w.host == nil && seatBlocked[g]) {
				continue
			}
			switch st {
			case statusOK:
				if best == nil || float64(c.headroom)/float64(max(c.g.budget(), 1)) >
					float64(best.headroom)/float64(max(best.g.budget(), 1)) {
					best = &c
				}
			case statusMemory:
				memBlocked = append(memBlocked, g)
			case statusSeat:
				seatBlocked[g] = true
			}
		}
		switch {
		case best != nil:
			e.queue = slices.Delete(e.queue, i, i+1)
			e.admitLocked(w, *best)
			continue
		case !eligible:
			e.queue = slices.Delete(e.queue, i, i+1)
			var err error
			if w.host != nil {
				err = &RetryableError{Reason: ReasonGPULost, GPU: w.gpu.uuid}
			} else if err = e.checkFitsLocked(w.req); err == nil {
				err = &NeverFitsError{AudioSeconds: w.req.AudioSeconds}
			}
			w.ready <- placement{err: err}
			continue
		}
		for _, g := range memBlocked {
			blocked[g] = true
			e.releaseForLocked(w, g)
		}
		if e.allBlocked(blocked) {
			return // nothing behind can be admitted; lost-GPU failures wait for the next pass
		}
		i++
	}
}

func (e *Executor) allBlocked(blocked map[*gpuState]bool) bool {
	n := 0
	for _, g := range e.gpus {
		if g.lost {
			continue
		}
		if !blocked[g] {
			return false
		}
		n++
	}
	return n > 0
}

func (e *Executor) admitLocked(w *waiter, c candidate) {
	now := e.cfg.Now()
	g, h := c.g, c.h
	if w.host != nil {
		h.placed, h.changedAt = true, now
		w.ready <- placement{}
		return
	}
	l := &Lease{
		e: e, g: g, h: h, seat: c.seat, GPU: g.uuid, GPUIndex: g.index, HostID: h.spec.ID,
		HostPID: h.pid, Handle: h.handle, Lane: c.lane, Request: w.req,
		PredictedBytes: c.peak, BaseBytes: c.base, Admitted: now, lost: make(chan struct{}),
	}
	for k := range h.busy {
		if h.busy[k] == nil {
			h.busy[k] = l
			break
		}
	}
	h.inflight += c.peak
	h.changedAt = now
	g.running++
	if c.lane == LaneLong {
		g.longRunning++
	}
	g.c.Admitted++
	g.c.WaitSeconds += now.Sub(w.since).Seconds()
	w.ready <- placement{lease: l}
}

// releaseForLocked asks idle hosts on g to release their caches when that would let
// w in. It issues nothing while a release is already under way on g.
func (e *Executor) releaseForLocked(w *waiter, g *gpuState) {
	if g.releasing > 0 {
		return
	}
	var idle []*hostState
	for _, h := range g.hosts {
		if h.ready && h.placed && h.releaser != nil && !h.noRelease && !h.releasing &&
			h.nBusy() == 0 && h.cached > 0 {
			idle = append(idle, h)
		}
	}
	if len(idle) == 0 {
		return
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].cached > idle[j].cached })
	budget, committed := g.budget(), g.committed()
	if w.host != nil {
		var freed int64
		for i, h := range idle {
			freed += h.cached
			if committed-freed+w.host.model <= budget {
				e.startReleasesLocked(g, idle[:i+1])
				return
			}
		}
		return
	}
	// The request goes to a host with a free seat; releasing that host's own cache
	// never costs more than keeping it, so consider every idle host releasable and
	// find the fewest releases that make room, for the best placement.
	peak := g.predict(w.req.AudioSeconds)
	var plan []*hostState
	for h, layout := range g.seatLayout() {
		if !h.ready || h.releasing || h.nBusy() >= layout[1] {
			continue
		}
		growth := max(h.cached, h.inflight+peak) - max(h.cached, h.inflight)
		need := committed + growth - budget
		var freed int64
		var set []*hostState
		for _, q := range idle {
			if freed >= need {
				break
			}
			gain := q.cached
			if q == h { // releasing the target turns its growth into the full peak
				gain = q.cached - (peak - growth)
			}
			if gain <= 0 {
				continue
			}
			freed += gain
			set = append(set, q)
		}
		if freed >= need && (plan == nil || len(set) < len(plan)) {
			plan = set
		}
	}
	if len(plan) > 0 {
		e.startReleasesLocked(g, plan)
	}
}

func (e *Executor) startReleasesLocked(g *gpuState, hosts []*hostState) {
	for _, h := range hosts {
		h.releasing = true
		g.releasing++
		g.c.CacheReleases++
		e.log.Info("asking a model host to release its cache", "gpu", g.uuid, "host", h.spec.ID,
			"cached_bytes", h.cached)
		go e.release(g, h)
	}
}

func (e *Executor) release(g *gpuState, h *hostState) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.ReleaseTimeout)
	defer cancel()
	after, err := h.releaser.ReleaseCache(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	h.releasing = false
	g.releasing--
	if err != nil {
		h.noRelease = true
		g.c.CacheReleaseErrors++
		e.log.Warn("model host could not release its cache", "gpu", g.uuid, "host", h.spec.ID, "error", err)
	} else {
		h.cached = max(after, 0)
		h.pristine = h.cached == 0
		h.changedAt = e.cfg.Now()
	}
	e.dispatchLocked()
}

// detachLocked takes a lease off its host and GPU because the host or GPU is gone.
func (e *Executor) detachLocked(l *Lease, err error) {
	if l.detached || l.done {
		return
	}
	e.freeLocked(l)
	l.detached = true
	l.lostErr = err
	l.g.c.LostLeases++
	close(l.lost)
}

func (e *Executor) freeLocked(l *Lease) {
	h, g := l.h, l.g
	for k := range h.busy {
		if h.busy[k] == l {
			h.busy[k] = nil
		}
	}
	h.inflight -= l.PredictedBytes
	g.running--
	if l.Lane == LaneLong {
		g.longRunning--
	}
	if h.draining && h.drained != nil && h.nBusy() == 0 {
		closeOnce(h.drained)
	}
}

// Done ends the lease with what happened. It returns a *RetryableError when the
// request must run again (out of memory, dead host, lost GPU), and nil otherwise.
// Calling it again returns the same result.
func (l *Lease) Done(o Outcome) error {
	e := l.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if l.done {
		return l.result
	}
	l.done = true
	g, h := l.g, l.h
	if l.detached {
		l.result = l.lostErr
		return l.result
	}
	inflightBefore := h.inflight
	e.freeLocked(l)
	h.changedAt = e.cfg.Now()
	defer e.dispatchLocked()
	if o.NotRun {
		return nil
	}
	h.pristine, h.noRelease = false, false
	learnCache := func() {
		if o.CachedAfter > 0 {
			h.cached = o.CachedAfter
		} else {
			h.cached = max(h.cached, inflightBefore, o.PeakBytes)
		}
	}
	s := e.cfg.Safety
	switch {
	case o.HostDied:
		h.dead = true
		g.c.HostDeaths++
		g.c.Failed++
		l.result = &RetryableError{Reason: ReasonHostDied, GPU: g.uuid}
	case o.OOM:
		learnCache()
		old := g.factor
		g.factor = min(s.Max, g.factor*s.OOMMultiplier)
		g.cleanStreak = 0
		g.c.OOMs++
		g.c.Failed++
		e.log.Warn("out of memory: safety factor raised", "gpu", g.uuid, "request", l.Request.ID,
			"predicted_bytes", l.PredictedBytes, "factor_before", old, "factor", g.factor)
		l.result = &RetryableError{Reason: ReasonOutOfMemory, GPU: g.uuid}
	default:
		learnCache()
		g.c.Completed++
		if o.PeakBytes > l.PredictedBytes && l.BaseBytes > 0 {
			// The prediction was wrong even with the factor: trust the measurement.
			g.c.Underpredictions++
			g.factor = min(s.Max, max(g.factor, float64(o.PeakBytes)/float64(l.BaseBytes)))
			g.cleanStreak = 0
			e.log.Warn("request peaked above its prediction", "gpu", g.uuid, "request", l.Request.ID,
				"predicted_bytes", l.PredictedBytes, "peak_bytes", o.PeakBytes, "factor", g.factor)
			break
		}
		g.cleanStreak++
		if g.cleanStreak >= s.DecayEvery && g.factor > 1 {
			g.cleanStreak = 0
			g.factor = 1 + (g.factor-1)*(1-s.DecayStep)
			if g.factor < 1.001 {
				g.factor = 1
			}
		}
	}
	return l.result
}

// GPUCounters are monotonic counters of one GPU, for /metrics.
type GPUCounters struct {
	Admitted, Completed, Failed  uint64
	OOMs, HostDeaths, LostLeases uint64
	Underpredictions             uint64
	CacheReleases                uint64
	CacheReleaseErrors           uint64
	// WaitSeconds is the total time admitted requests waited.
	WaitSeconds float64
}

// Counters are the executor's numbers for /metrics.
type Counters struct {
	// NeverFits counts requests refused because they can never fit.
	NeverFits uint64
	// Waiting is a gauge: requests (and host starts) waiting now.
	Waiting int
	GPUs    []GPUMetrics
}

// GPUMetrics are one GPU's counters and gauges.
type GPUMetrics struct {
	UUID  string
	Index int
	GPUCounters
	Running, LongRunning                    int
	BudgetBytes, CommittedBytes, TotalBytes int64
	ForeignBytes                            int64
	SafetyFactor                            float64
	Lost                                    bool
}

// Metrics returns the counters and gauges.
func (e *Executor) Metrics() Counters {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := Counters{NeverFits: e.counters.NeverFits, Waiting: len(e.queue)}
	for _, g := range e.gpus {
		c.GPUs = append(c.GPUs, GPUMetrics{
			UUID: g.uuid, Index: g.index, GPUCounters: g.c, Running: g.running, LongRunning: g.longRunning,
			BudgetBytes: g.budget(), CommittedBytes: g.committed(), TotalBytes: g.total,
			ForeignBytes: g.foreign, SafetyFactor: g.factor, Lost: g.lost,
		})
	}
	return c
}

// GPUSnapshot is one GPU as the admin page shows it.
type GPUSnapshot struct {
	UUID    string
	Index   int
	Name    string
	Lost    bool
	Profile Profile
	// Calibrated is false while predictions use the defaults.
	Calibrated                                            bool
	TotalBytes, BudgetBytes, CommittedBytes, ForeignBytes int64
	// NVMLUsedBytes is the device's used memory in the last sample (0 without one).
	NVMLUsedBytes        int64
	SafetyFactor         float64
	Running, LongRunning int
	Hosts                []HostSnapshot
}

// HostState is a host's state in a snapshot.
type HostState string

// Host states.
const (
	HostStarting  HostState = "starting"
	HostServing   HostState = "serving"
	HostReleasing HostState = "releasing"
	HostDraining  HostState = "draining"
	HostDead      HostState = "dead"
)

// HostSnapshot is one model host.
type HostSnapshot struct {
	ID         string
	PID        int
	State      HostState
	ModelBytes int64
	// CachedBytes is the allocator's reserve beyond the model, as last known.
	CachedBytes int64
	// NVMLBytes is the host's memory in the last sample.
	NVMLBytes int64
	Seats     []SeatSnapshot
}

// SeatSnapshot is one seat of a host; Request is empty when idle.
type SeatSnapshot struct {
	Seat    int
	Request string
	// LineID is the request's line (0: none).
	LineID         int64
	AudioSeconds   float64
	Lane           Lane
	PredictedBytes int64
	Since          time.Time
}

// Snapshot returns every GPU's budget, commitments and seats.
func (e *Executor) Snapshot() []GPUSnapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]GPUSnapshot, 0, len(e.gpus))
	for _, g := range e.gpus {
		gs := GPUSnapshot{
			UUID: g.uuid, Index: g.index, Name: g.name, Lost: g.lost, Profile: g.profile,
			Calibrated: g.cal.Calibrated(), TotalBytes: g.total, BudgetBytes: g.budget(),
			CommittedBytes: g.committed(), ForeignBytes: g.foreign, NVMLUsedBytes: g.nvmlUsed,
			SafetyFactor: g.factor, Running: g.running, LongRunning: g.longRunning,
		}
		layout := g.seatLayout()
		next := 0
		for _, h := range g.hosts {
			hs := HostSnapshot{ID: h.spec.ID, PID: h.pid, ModelBytes: h.model, CachedBytes: h.cached,
				NVMLBytes: h.nvmlBytes}
			switch {
			case h.dead:
				hs.State = HostDead
			case h.draining:
				hs.State = HostDraining
			case !h.ready:
				hs.State = HostStarting
			case h.releasing:
				hs.State = HostReleasing
			default:
				hs.State = HostServing
			}
			start := next
			if lo, ok := layout[h]; ok {
				start = lo[0]
			}
			for k, l := range h.busy {
				s := SeatSnapshot{Seat: start + k}
				if l != nil {
					s.Seat = l.seat
					s.Request, s.LineID, s.AudioSeconds, s.Lane = l.Request.ID, l.Request.LineID, l.Request.AudioSeconds, l.Lane
					s.PredictedBytes, s.Since = l.PredictedBytes, l.Admitted
				}
				hs.Seats = append(hs.Seats, s)
			}
			next = start + len(h.busy)
			gs.Hosts = append(gs.Hosts, hs)
		}
		out = append(out, gs)
	}
	return out
}

// Follow feeds every round of the monitor's samples to the executor until ctx ends
// or the monitor closes. Run it beside Monitor.Run.
func (e *Executor) Follow(ctx context.Context, m *Monitor) {
	ch, stop := m.Subscribe()
	defer stop()
	e.FollowSamples(ctx, ch)
}

// FollowSamples observes every round of samples from ch until ctx ends or ch closes.
func (e *Executor) FollowSamples(ctx context.Context, ch <-chan []Sample) {
	for {
		select {
		case <-ctx.Done():
			return
		case samples, ok := <-ch:
			if !ok {
				return
			}
			for _, s := range samples {
				e.Observe(s)
			}
		}
	}
}

// AddMonitoredGPUs adds every GPU the monitor found, with the profile and
// calibration profileFor returns for it, and feeds it the latest sample.
func (e *Executor) AddMonitoredGPUs(m *Monitor, profileFor func(Device) (Profile, Calibration)) error {
	for _, d := range m.Devices() {
		if d.Lost {
			continue
		}
		p, cal := profileFor(d)
		if err := e.AddGPU(GPUConfig{UUID: d.UUID, Index: d.Index, Name: d.Name, TotalBytes: d.TotalBytes,
			Profile: p, Calibration: cal}); err != nil {
			return err
		}
		if s, ok := m.Latest(d.UUID); ok {
			e.Observe(s)
		}
	}
	return nil
}
