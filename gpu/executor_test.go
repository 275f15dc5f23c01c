package gpu

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"dubstudio/i18n"
	"dubstudio/internal/simdev"

	"github.com/stretchr/testify/require"
)

// simHost is a model host on a simulated device; it can release its cache.
type simHost struct {
	id       string
	proc     *simdev.Process
	busy     atomic.Bool
	releases atomic.Int64
}

func (h *simHost) ReleaseCache(context.Context) (int64, error) {
	h.releases.Add(1)
	h.proc.EmptyCache()
	return h.proc.Stats().Reserved, nil
}

// simGPU is one simulated GPU registered with an executor.
type simGPU struct {
	uuid  string
	dev   *simdev.Device
	hosts []*simHost
	long  atomic.Int64 // long-lane requests running, as the workers see them
}

func (g *simGPU) sample() Sample {
	now := time.Now() // before the reading: a change after it makes the sample stale
	r := g.dev.Read()
	s := Sample{Time: now, UUID: g.uuid, TotalBytes: r.Total, UsedBytes: r.Used, FreeBytes: r.Free}
	for _, p := range r.Processes {
		s.Processes = append(s.Processes, ProcessMemory{PID: p.PID, UsedBytes: p.UsedBytes})
	}
	return s
}

func testProfile() Profile {
	return Profile{Name: "test", Concurrency: 4, ReservePct: 10, LongTextThresholdSec: 15, LongLaneLimit: 2,
		MaxGenSeconds: 30, SegmentTokens: 120, FP16: true}
}

// addSimGPU adds a simulated GPU with n hosts of 5 GiB each to e.
func addSimGPU(t *testing.T, e *Executor, uuid string, total, foreign int64, p Profile, n int) *simGPU {
	t.Helper()
	ctx := context.Background()
	g := &simGPU{uuid: uuid, dev: simdev.New(total)}
	g.dev.SetForeign(foreign)
	require.NoError(t, e.AddGPU(GPUConfig{UUID: uuid, Index: len(e.Snapshot()), Name: "Sim", TotalBytes: total,
		Profile: p, Calibration: Calibration{ResidentBytes: DefaultResidentBytes}}))
	e.Observe(g.sample())
	for i := range n {
		h := &simHost{id: fmt.Sprintf("%s-h%d", uuid, i)}
		require.NoError(t, e.AddHost(ctx, uuid, HostSpec{ID: h.id, Order: i}))
		proc, err := g.dev.Spawn(DefaultResidentBytes)
		require.NoError(t, err)
		h.proc = proc
		require.NoError(t, e.HostReady(uuid, h.id, ReadyHost{PID: proc.PID(), Releaser: h, Handle: h}))
		g.hosts = append(g.hosts, h)
	}
	e.Observe(g.sample())
	return g
}

// waitSignal makes e report each request that starts waiting on the returned channel.
func waitSignal(e *Executor) <-chan string {
	ch := make(chan string, 64)
	e.mu.Lock()
	e.waitHook = func(r Request) { ch <- r.ID }
	e.mu.Unlock()
	return ch
}

type acquired struct {
	lease *Lease
	err   error
}

func acquireAsync(e *Executor, ctx context.Context, req Request) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := e.Acquire(ctx, req)
		ch <- acquired{l, err}
	}()
	return ch
}

func metricsOf(e *Executor, uuid string) GPUMetrics {
	for _, m := range e.Metrics().GPUs {
		if m.UUID == uuid {
			return m
		}
	}
	return GPUMetrics{}
}

// TestRandomLoadNeverExceedsBudget runs mixed lengths from many goroutines against
// two simulated GPUs whose budget holds the four models plus about one long peak.
// With honest predictions (the true peak never above the calibration) there must be
// no OOM, the device must never pass its budget, and the long lane and concurrency must
// never be oversubscribed. Caches ratchet, so the executor must release them.
func TestRandomLoadNeverExceedsBudget(t *testing.T) {
	t.Parallel()
	e := NewExecutor(ExecutorConfig{})
	p := testProfile()
	total := 24 * GiB
	gpus := []*simGPU{
		addSimGPU(t, e, "GPU-a", total, 300*MiB, p, 4),
		addSimGPU(t, e, "GPU-b", total, 0, p, 4),
	}
	byUUID := map[string]*simGPU{}
	for _, g := range gpus {
		byUUID[g.uuid] = g
	}

	const workers, perWorker = 24, 30
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		problems []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range perWorker {
				sec := 1 + rng.Float64()*29
				l, err := e.Acquire(context.Background(), Request{ID: fmt.Sprintf("w%d-%d", w, i), AudioSeconds: sec})
				if err != nil {
					fail("acquire: %v", err)
					return
				}
				g, h := byUUID[l.GPU], l.Handle.(*simHost)
				if !h.busy.CompareAndSwap(false, true) {
					fail("host %s given two requests", h.id)
				}
				if l.Lane == LaneLong {
					if n := g.long.Add(1); n > int64(p.LongLaneLimit) {
						fail("%d long requests on %s", n, g.uuid)
					}
				}
				truePeak := int64(float64(l.BaseBytes) * (0.7 + 0.3*rng.Float64()))
				err = h.proc.Infer(truePeak, runtime.Gosched)
				if err != nil {
					fail("OOM on %s: %v", g.uuid, err)
				}
				cached := h.proc.Stats().Reserved
				if l.Lane == LaneLong {
					g.long.Add(-1)
				}
				h.busy.Store(false)
				if err := l.Done(Outcome{PeakBytes: truePeak, OOM: err != nil, CachedAfter: cached}); err != nil {
					fail("done: %v", err)
				}
				e.Observe(g.sample())
			}
		})
	}
	wg.Wait()
	require.Empty(t, problems)

	var releases int64
	for _, g := range gpus {
		require.Zero(t, g.dev.OOMs(), g.uuid)
		require.LessOrEqual(t, g.dev.PeakUsed()-g.dev.Foreign(), p.Budget(total, g.dev.Foreign()),
			"%s: our memory (peak minus foreign) stayed within the budget", g.uuid)
		m := metricsOf(e, g.uuid)
		require.Zero(t, m.OOMs)
		require.Zero(t, m.Underpredictions)
		require.InDelta(t, 1.0, m.SafetyFactor, 1e-9)
		require.Zero(t, m.Running)
		for _, h := range g.hosts {
			releases += h.releases.Load()
		}
		t.Logf("%s: %d admitted, peak %.2f GiB of budget %.2f GiB, %d cache releases",
			g.uuid, m.Admitted, float64(g.dev.PeakUsed()-g.dev.Foreign())/float64(GiB),
			float64(m.BudgetBytes)/float64(GiB), m.CacheReleases)
	}
	require.Positive(t, releases, "caches ratchet past the budget: releases must have happened")
	require.Equal(t, uint64(workers*perWorker),
		metricsOf(e, "GPU-a").Completed+metricsOf(e, "GPU-b").Completed)
	require.Zero(t, e.Metrics().Waiting)
}

func TestOOMRaisesSafetyFactorAndCleanRunsDecayIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := NewExecutor(ExecutorConfig{Safety: SafetyConfig{OOMMultiplier: 1.25, Max: 2, DecayEvery: 4, DecayStep: 0.5}})
	addSimGPU(t, e, "GPU-a", 80*GiB, 0, testProfile(), 1)
	factor := func() float64 { return metricsOf(e, "GPU-a").SafetyFactor }
	base := Calibration{}.PeakBytes(10)

	l, err := e.Acquire(ctx, Request{ID: "a", AudioSeconds: 10})
	require.NoError(t, err)
	require.Equal(t, base, l.PredictedBytes)
	err = l.Done(Outcome{OOM: true})
	require.True(t, IsRetryable(err))
	var re *RetryableError
	require.ErrorAs(t, err, &re)
	require.Equal(t, ReasonOutOfMemory, re.Reason)
	require.Equal(t, "gpu.error.out_of_memory", re.MessageKey())
	require.Equal(t, "A GPU (GPU-a) ran out of memory. The line will be retried with a larger safety margin.", re.In(i18n.EN))
	require.Equal(t, "此工作节点没有可用的 GPU。", (&RetryableError{Reason: ReasonNoGPU}).In(i18n.ZH))
	require.Equal(t, err, l.Done(Outcome{}), "Done is idempotent")
	require.InDelta(t, 1.25, factor(), 1e-9)

	l, err = e.Acquire(ctx, Request{ID: "b", AudioSeconds: 10})
	require.NoError(t, err)
	require.Equal(t, int64(float64(base)*1.25+0.999), l.PredictedBytes, "predictions carry the factor")
	require.Error(t, l.Done(Outcome{OOM: true}))
	require.InDelta(t, 1.5625, factor(), 1e-9)
	for range 5 {
		l, err = e.Acquire(ctx, Request{ID: "c", AudioSeconds: 10})
		require.NoError(t, err)
		require.Error(t, l.Done(Outcome{OOM: true}))
	}
	require.InDelta(t, 2.0, factor(), 1e-9, "capped")
	require.EqualValues(t, 7, metricsOf(e, "GPU-a").OOMs)

	clean := func(n int) {
		for range n {
			l, err := e.Acquire(ctx, Request{ID: "clean", AudioSeconds: 10})
			require.NoError(t, err)
			require.NoError(t, l.Done(Outcome{PeakBytes: base}))
		}
	}
	clean(3)
	require.InDelta(t, 2.0, factor(), 1e-9, "decay waits for a streak")
	clean(1)
	require.InDelta(t, 1.5, factor(), 1e-9)
	clean(4)
	require.InDelta(t, 1.25, factor(), 1e-9)
	clean(40)
	require.InDelta(t, 1.0, factor(), 1e-9, "back to 1.0 after a long clean streak")

	// A clean run that peaks above its prediction raises the factor to the measurement.
	l, err = e.Acquire(ctx, Request{ID: "under", AudioSeconds: 10})
	require.NoError(t, err)
	require.NoError(t, l.Done(Outcome{PeakBytes: base * 3 / 2}))
	require.InDelta(t, 1.5, factor(), 0.01)
	require.EqualValues(t, 1, metricsOf(e, "GPU-a").Underpredictions)
}

func TestDeadHostWorkIsRetryable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := NewExecutor(ExecutorConfig{})
	g := addSimGPU(t, e, "GPU-a", 80*GiB, 0, testProfile(), 2)

	l1, err := e.Acquire(ctx, Request{ID: "one", AudioSeconds: 5})
	require.NoError(t, err)
	l2, err := e.Acquire(ctx, Request{ID: "two", AudioSeconds: 5})
	require.NoError(t, err)
	require.NotEqual(t, l1.HostID, l2.HostID)

	// The host of l1 is killed: the pool reports it.
	e.RemoveHost("GPU-a", l1.HostID, errors.New("signal: killed"))
	select {
	case <-l1.Lost():
	default:
		t.Fatal("the lease of a removed host is not lost")
	}
	require.True(t, IsRetryable(l1.Err()))
	err = l1.Done(Outcome{})
	var re *RetryableError
	require.ErrorAs(t, err, &re)
	require.Equal(t, ReasonHostDied, re.Reason)
	require.Equal(t, "GPU-a", re.GPU)
	select {
	case <-l2.Lost():
		t.Fatal("the other host's lease is lost")
	default:
	}

	// The host of l2 dies under its request: the outcome says so.
	err = l2.Done(Outcome{HostDied: true})
	require.True(t, IsRetryable(err))
	require.ErrorAs(t, err, &re)
	require.Equal(t, ReasonHostDied, re.Reason)
	snap := e.Snapshot()[0]
	require.Len(t, snap.Hosts, 1)
	require.Equal(t, HostDead, snap.Hosts[0].State)

	// No host serves now: a request waits until the pool brings a replacement.
	waiting := waitSignal(e)
	res := acquireAsync(e, ctx, Request{ID: "retry", AudioSeconds: 5})
	require.Equal(t, "retry", <-waiting)
	e.RemoveHost("GPU-a", l2.HostID, errors.New("exit status 1"))
	h := &simHost{id: "replacement"}
	require.NoError(t, e.AddHost(ctx, "GPU-a", HostSpec{ID: h.id, Order: 1}))
	proc, err := g.dev.Spawn(DefaultResidentBytes)
	require.NoError(t, err)
	h.proc = proc
	require.NoError(t, e.HostReady("GPU-a", h.id, ReadyHost{PID: proc.PID(), Releaser: h, Handle: h}))
	got := <-res
	require.NoError(t, got.err)
	require.Equal(t, "replacement", got.lease.HostID)
	require.NoError(t, got.lease.Done(Outcome{}))
	require.EqualValues(t, 2, metricsOf(e, "GPU-a").HostDeaths, "two hosts died, each counted once")
}

func TestLostGPUWorkIsRetriedElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := NewExecutor(ExecutorConfig{})
	addSimGPU(t, e, "GPU-a", 80*GiB, 0, testProfile(), 1)
	addSimGPU(t, e, "GPU-b", 80*GiB, 0, testProfile(), 1)

	la, err := e.Acquire(ctx, Request{ID: "x", AudioSeconds: 5})
	require.NoError(t, err)
	lb, err := e.Acquire(ctx, Request{ID: "y", AudioSeconds: 5})
	require.NoError(t, err)
	require.NotEqual(t, la.GPU, lb.GPU, "work spreads over both GPUs")
	if la.GPU != "GPU-a" {
		la, lb = lb, la
	}

	e.Observe(Sample{UUID: "GPU-a", Lost: true})
	<-la.Lost()
	err = la.Done(Outcome{})
	require.ErrorIs(t, err, ErrRetryable)
	require.ErrorIs(t, err, ErrGPULost)

	// The retry goes to GPU-b once it has a free seat.
	waiting := waitSignal(e)
	res := acquireAsync(e, ctx, Request{ID: "x again", AudioSeconds: 5})
	require.Equal(t, "x again", <-waiting)
	require.NoError(t, lb.Done(Outcome{}))
	got := <-res
	require.NoError(t, got.err)
	require.Equal(t, "GPU-b", got.lease.GPU)

	// With every GPU lost, waiting work and new work fail as retryable.
	res = acquireAsync(e, ctx, Request{ID: "z", AudioSeconds: 5})
	require.Equal(t, "z", <-waiting)
	e.MarkLost("GPU-b", errors.New("fell off the bus"))
	require.ErrorIs(t, (<-res).err, ErrNoGPU)
	require.ErrorIs(t, got.lease.Done(Outcome{}), ErrGPULost)
	_, err = e.Acquire(ctx, Request{ID: "late", AudioSeconds: 5})
	require.True(t, IsRetryable(err))
	require.ErrorIs(t, err, ErrNoGPU)
	require.True(t, e.Snapshot()[0].Lost)
}

func TestLongLaneLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := NewExecutor(ExecutorConfig{})
	p := testProfile()
	p.LongLaneLimit = 1
	addSimGPU(t, e, "GPU-a", 80*GiB, 0, p, 3)
	waiting := waitSignal(e)

	long1, err := e.Acquire(ctx, Request{ID: "long1", AudioSeconds: 20})
	require.NoError(t, err)
	require.Equal(t, LaneLong, long1.Lane)

	res := acquireAsync(e, ctx, Request{ID: "long2", AudioSeconds: 25})
	require.Equal(t, "long2", <-waiting)

	// A normal request behind the waiting long one is not held back by the lane.
	short, err := e.Acquire(ctx, Request{ID: "short", AudioSeconds: 5})
	require.NoError(t, err)
	require.Equal(t, LaneNormal, short.Lane)
	require.Equal(t, 1, e.Metrics().Waiting)
	require.Equal(t, 1, metricsOf(e, "GPU-a").LongRunning)

	require.NoError(t, long1.Done(Outcome{}))
	got := <-res
	require.NoError(t, got.err)
	require.Equal(t, LaneLong, got.lease.Lane)
	require.NoError(t, got.lease.Done(Outcome{}))
	require.NoError(t, short.Done(Outcome{}))
}

// blockingReleaser records release requests and answers when told to.
type blockingReleaser struct {
	calls  chan string
	answer chan int64
	id     string
}

func (b *blockingReleaser) ReleaseCache(ctx context.Context) (int64, error) {
	b.calls <- b.id
	select {
	case v := <-b.answer:
		return v, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func TestCacheReleaseUnblocksAdmission(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := NewExecutor(ExecutorConfig{})
	p := testProfile()
	p.ReservePct = 0
	total := 2*DefaultResidentBytes + 1500*MiB
	require.NoError(t, e.AddGPU(GPUConfig{UUID: "GPU-a", TotalBytes: total, Profile: p}))
	calls := make(chan string, 4)
	rel := map[string]*blockingReleaser{}
	for i, id := range []string{"A", "B"} {
		rel[id] = &blockingReleaser{calls: calls, answer: make(chan int64, 1), id: id}
		require.NoError(t, e.AddHost(ctx, "GPU-a", HostSpec{ID: id, Order: i}))
		require.NoError(t, e.HostReady("GPU-a", id, ReadyHost{PID: 100 + i, Releaser: rel[id]}))
	}
	cal := Calibration{}
	// Both hosts ran a 14 s line and kept its peak cached.
	for range 2 {
		l1, err := e.Acquire(ctx, Request{ID: "warm", AudioSeconds: 14})
		require.NoError(t, err)
		l2, err := e.Acquire(ctx, Request{ID: "warm", AudioSeconds: 14})
		require.NoError(t, err)
		require.NoError(t, l1.Done(Outcome{CachedAfter: cal.PeakBytes(14)}))
		require.NoError(t, l2.Done(Outcome{CachedAfter: cal.PeakBytes(14)}))
	}
	snap := e.Snapshot()[0]
	require.Equal(t, 2*DefaultResidentBytes+2*cal.PeakBytes(14), snap.CommittedBytes)
	require.Zero(t, metricsOf(e, "GPU-a").CacheReleases, "nothing was blocked yet")

	// A 30 s line needs more than either cache: one host's cache must go.
	waiting := waitSignal(e)
	res := acquireAsync(e, ctx, Request{ID: "long", AudioSeconds: 30})
	require.Equal(t, "long", <-waiting)
	released := <-calls
	require.EqualValues(t, 1, metricsOf(e, "GPU-a").CacheReleases)
	require.Equal(t, HostReleasing, hostStateOf(t, e, released))
	rel[released].answer <- 0
	got := <-res
	require.NoError(t, got.err)
	require.NotEqual(t, released, got.lease.HostID, "the request reuses the other host's cache")
	require.LessOrEqual(t, e.Snapshot()[0].CommittedBytes, e.Snapshot()[0].BudgetBytes)
	select {
	case id := <-calls:
		t.Fatalf("a second release (%s) was not needed", id)
	default:
	}
	require.NoError(t, got.lease.Done(Outcome{CachedAfter: cal.PeakBytes(30)}))
}

func TestNoCacheReleaseWhenItCannotHelp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := NewExecutor(ExecutorConfig{})
	p := testProfile()
	p.ReservePct = 0
	total := 2*DefaultResidentBytes + 1300*MiB
	require.NoError(t, e.AddGPU(GPUConfig{UUID: "GPU-a", TotalBytes: total, Profile: p}))
	calls := make(chan string, 4)
	for i, id := range []string{"A", "B"} {
		r := &blockingReleaser{calls: calls, answer: make(chan int64, 1), id: id}
		require.NoError(t, e.AddHost(ctx, "GPU-a", HostSpec{ID: id, Order: i}))
		require.NoError(t, e.HostReady("GPU-a", id, ReadyHost{PID: 100 + i, Releaser: r}))
	}
	// B keeps a small cache; A runs a 30 s line.
	small, err := e.Acquire(ctx, Request{ID: "small", AudioSeconds: 2})
	require.NoError(t, err)
	require.NoError(t, small.Done(Outcome{CachedAfter: 100 * MiB}))
	big, err := e.Acquire(ctx, Request{ID: "big", AudioSeconds: 30})
	require.NoError(t, err)

	// Another 30 s line is blocked by memory in use, which no release can free.
	waiting := waitSignal(e)
	res := acquireAsync(e, ctx, Request{ID: "big2", AudioSeconds: 30})
	require.Equal(t, "big2", <-waiting)
	require.Zero(t, metricsOf(e, "GPU-a").CacheReleases)
	require.NoError(t, big.Done(Outcome{CachedAfter: Calibration{}.PeakBytes(30)}))
	got := <-res
	require.NoError(t, got.err)
	require.Equal(t, big.HostID, got.lease.HostID, "the host whose cache fits takes it, no release needed")
	require.Zero(t, metricsOf(e, "GPU-a").CacheReleases)
	require.Empty(t, calls)
	require.NoError(t, got.lease.Done(Outcome{}))
}

func hostStateOf(t *testing.T, e *Executor, id string) HostState {
	t.Helper()
	for _, g := range e.Snapshot() {
		for _, h := range g.Hosts {
			if h.ID == id {
				return h.State
			}
		}
	}
	t.Fatalf("no host %s", id)
	return ""
}

func TestFIFOHoldsBackSmallerRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := NewExecutor(ExecutorConfig{})
	p := testProfile()
	p.ReservePct = 0
	// Three hosts; room for one 30 s peak and a little more.
	total := 3*DefaultResidentBytes + 1400*MiB
	require.NoError(t, e.AddGPU(GPUConfig{UUID: "GPU-a", TotalBytes: total, Profile: p}))
	for i, id := range []string{"A", "B", "C"} {
		require.NoError(t, e.AddHost(ctx, "GPU-a", HostSpec{ID: id, Order: i}))
		require.NoError(t, e.HostReady("GPU-a", id, ReadyHost{PID: 100 + i}))
	}
	waiting := waitSignal(e)
	first, err := e.Acquire(ctx, Request{ID: "first", AudioSeconds: 30})
	require.NoError(t, err)
	big := acquireAsync(e, ctx, Request{ID: "big", AudioSeconds: 30})
	require.Equal(t, "big", <-waiting)
	// A 2 s line would fit beside "first", but "big" is ahead of it.
	small := acquireAsync(e, ctx, Request{ID: "small", AudioSeconds: 2})
	require.Equal(t, "small", <-waiting)
	require.Equal(t, 2, e.Metrics().Waiting)

	// Cancelling a waiter leaves the queue as it was.
	cctx, cancel := context.WithCancel(ctx)
	cancelled := acquireAsync(e, cctx, Request{ID: "cancelled", AudioSeconds: 2})
	require.Equal(t, "cancelled", <-waiting)
	cancel()
	require.ErrorIs(t, (<-cancelled).err, context.Canceled)
	require.Equal(t, 2, e.Metrics().Waiting)

	require.NoError(t, first.Done(Outcome{CachedAfter: Calibration{}.PeakBytes(30)}))
	b := <-big
	require.NoError(t, b.err)
	require.Equal(t, first.HostID, b.lease.HostID, "the 30 s line reuses the cache it left")
	s := <-small
	require.NoError(t, s.err)
	require.NoError(t, b.lease.Done(Outcome{}))
	require.NoError(t, s.lease.Done(Outcome{}))
}

// An editor's retake waits ahead of the lines queued before it, behind the retakes
// queued before it: with the only seat busy, first requests sent after two others
// are admitted before them, in their own order.
func TestFirstRequestsWaitAheadOfTheOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := NewExecutor(ExecutorConfig{})
	p := testProfile()
	p.Concurrency, p.LongLaneLimit = 1, 1
	addSimGPU(t, e, "GPU-a", 80*GiB, 0, p, 1)
	waiting := waitSignal(e)
	running, err := e.Acquire(ctx, Request{ID: "running", AudioSeconds: 5})
	require.NoError(t, err)
	reqs := []Request{{ID: "bulk1", AudioSeconds: 5}, {ID: "first1", AudioSeconds: 5, First: true},
		{ID: "bulk2", AudioSeconds: 5}, {ID: "first2", AudioSeconds: 5, First: true}}
	results := map[string]<-chan acquired{}
	for _, r := range reqs {
		results[r.ID] = acquireAsync(e, ctx, r)
		require.Equal(t, r.ID, <-waiting)
	}
	lease := running
	for _, want := range []string{"first1", "first2", "bulk1", "bulk2"} {
		require.NoError(t, lease.Done(Outcome{}))
		id, got := nextAdmitted(t, results)
		require.Equal(t, want, id)
		require.NoError(t, got.err, id)
		lease = got.lease
	}
	require.NoError(t, lease.Done(Outcome{}))
}

// nextAdmitted waits for one of the waiting requests to be admitted and returns it,
// taken out of waiting; it fails the test if none is within 10 s.
func nextAdmitted(t *testing.T, waiting map[string]<-chan acquired) (string, acquired) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for id, ch := range waiting {
			select {
			case got := <-ch:
				delete(waiting, id)
				return id, got
			default:
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("none of %d waiting requests was admitted", len(waiting))
	return "", acquired{}
}

func TestResizeLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := NewExecutor(ExecutorConfig{})
	g := addSimGPU(t, e, "GPU-a", 80*GiB, 0, testProfile(), 4)
	var leases []*Lease
	for i := range 4 {
		l, err := e.Acquire(ctx, Request{ID: fmt.Sprint(i), AudioSeconds: 3})
		require.NoError(t, err)
		require.Equal(t, i, l.Seat())
		leases = append(leases, l)
	}
	p := testProfile()
	p.Concurrency = 2
	require.NoError(t, e.SetProfile("GPU-a", p))
	got, err := e.Profile("GPU-a")
	require.NoError(t, err)
	require.Equal(t, 2, got.Concurrency)

	// Seats 2 and 3 finish but take nothing new; seats 0 and 1 are busy.
	waiting := waitSignal(e)
	res := acquireAsync(e, ctx, Request{ID: "next", AudioSeconds: 3})
	require.Equal(t, "next", <-waiting)
	require.NoError(t, leases[3].Done(Outcome{}))
	require.NoError(t, leases[2].Done(Outcome{}))
	require.Equal(t, 1, e.Metrics().Waiting)
	require.NoError(t, leases[0].Done(Outcome{}))
	next := <-res
	require.NoError(t, next.err)
	require.Equal(t, 0, next.lease.Seat())

	// Growing again uses the idle hosts at once.
	require.NoError(t, e.SetProfile("GPU-a", testProfile()))
	more, err := e.Acquire(ctx, Request{ID: "more", AudioSeconds: 3})
	require.NoError(t, err)
	require.Equal(t, 2, more.Seat())

	// Draining a host: its channel closes once its work is done.
	drained, err := e.DrainHost("GPU-a", g.hosts[2].id)
	require.NoError(t, err)
	select {
	case <-drained:
		t.Fatal("drained while busy")
	default:
	}
	require.NoError(t, more.Done(Outcome{}))
	<-drained
	require.Equal(t, HostDraining, hostStateOf(t, e, g.hosts[2].id))

	snap := e.Snapshot()[0]
	require.Equal(t, 2, snap.Running)
	busy := 0
	for _, h := range snap.Hosts {
		for _, s := range h.Seats {
			if s.Request != "" {
				busy++
				require.Positive(t, s.PredictedBytes)
			}
		}
	}
	require.Equal(t, 2, busy)
	require.Error(t, e.SetProfile("GPU-a", Profile{}), "an invalid profile is refused")
	require.NoError(t, next.lease.Done(Outcome{}))
	require.NoError(t, leases[1].Done(Outcome{}))
}

func TestNeverFits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := NewExecutor(ExecutorConfig{})
	_, err := e.Acquire(ctx, Request{ID: "none", AudioSeconds: 3})
	require.ErrorIs(t, err, ErrNoGPU, "no GPU at all")

	p := testProfile()
	p.ReservePct = 0
	require.NoError(t, e.AddGPU(GPUConfig{UUID: "GPU-a", TotalBytes: DefaultResidentBytes + 600*MiB, Profile: p}))

	_, err = e.Acquire(ctx, Request{ID: "too long", AudioSeconds: 31})
	var nf *NeverFitsError
	require.ErrorAs(t, err, &nf)
	require.ErrorIs(t, err, ErrNeverFits)
	require.True(t, nf.TooLong)
	require.Equal(t, "gpu.request.too_long", nf.MessageKey())
	require.Len(t, nf.MessageArgs(), 2)

	_, err = e.Acquire(ctx, Request{ID: "too big", AudioSeconds: 20})
	require.ErrorAs(t, err, &nf)
	require.False(t, nf.TooLong)
	require.Equal(t, Calibration{}.PeakBytes(20), nf.NeedBytes)
	require.Equal(t, 600*MiB, nf.MaxBytes)
	require.Equal(t, "gpu.request.never_fits", nf.MessageKey())
	require.Contains(t, nf.In(i18n.EN), "(20 s of speech), more than any GPU can give it (at most 0.6 GB)")
	require.NotContains(t, nf.In(i18n.ZH), "%!")
	require.EqualValues(t, 2, e.Metrics().NeverFits)

	// A request that fits an idle GPU waits for memory instead of failing.
	require.NoError(t, e.AddHost(ctx, "GPU-a", HostSpec{ID: "A"}))
	require.NoError(t, e.HostReady("GPU-a", "A", ReadyHost{PID: 1}))
	l, err := e.Acquire(ctx, Request{ID: "fits", AudioSeconds: 10})
	require.NoError(t, err)
	require.NoError(t, l.Done(Outcome{}))
}

func TestHostStartWaitsForMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := NewExecutor(ExecutorConfig{})
	p := testProfile()
	p.ReservePct = 0
	require.NoError(t, e.AddGPU(GPUConfig{UUID: "GPU-a", TotalBytes: 2*DefaultResidentBytes + 800*MiB, Profile: p}))
	require.NoError(t, e.AddHost(ctx, "GPU-a", HostSpec{ID: "A"}))
	require.NoError(t, e.HostReady("GPU-a", "A", ReadyHost{PID: 1}))
	busy, err := e.Acquire(ctx, Request{ID: "busy", AudioSeconds: 20}) // 805 MiB: no room for a second model
	require.NoError(t, err)

	started := make(chan error, 1)
	go func() { started <- e.AddHost(ctx, "GPU-a", HostSpec{ID: "B"}) }()
	require.NoError(t, busy.Done(Outcome{CachedAfter: 1}))
	require.NoError(t, <-started)
	require.Equal(t, 2*DefaultResidentBytes+1, e.Snapshot()[0].CommittedBytes)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, e.AddHost(cctx, "GPU-a", HostSpec{ID: "C"}), context.Canceled)
	require.Len(t, e.Snapshot()[0].Hosts, 2, "a host that never started is forgotten")
	require.Error(t, e.AddHost(ctx, "GPU-x", HostSpec{ID: "D"}))
}

func TestObserveLearnsModelCacheAndForeign(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var now atomic.Int64
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	tick := func() time.Time { return time.Unix(0, now.Add(1)) }
	e := NewExecutor(ExecutorConfig{Now: clock, ForeignWindow: 2})
	require.NoError(t, e.AddGPU(GPUConfig{UUID: "GPU-a", TotalBytes: 80 * GiB, Profile: testProfile()}))
	require.NoError(t, e.AddHost(ctx, "GPU-a", HostSpec{ID: "A", ModelBytes: 5 * GiB}))
	require.NoError(t, e.HostReady("GPU-a", "A", ReadyHost{PID: 42}))
	host := func() HostSnapshot { return e.Snapshot()[0].Hosts[0] }
	sample := func(used, proc int64) Sample {
		return Sample{Time: tick(), UUID: "GPU-a", TotalBytes: 80 * GiB, UsedBytes: used,
			FreeBytes: 80*GiB - used, Processes: []ProcessMemory{{PID: 42, UsedBytes: proc}, {PID: 7, UsedBytes: 1}}}
	}

	e.Observe(sample(7*GiB, 6*GiB)) // the model is bigger than expected
	require.Equal(t, 6*GiB, host().ModelBytes)
	require.Zero(t, host().CachedBytes)
	require.Equal(t, GiB, e.Snapshot()[0].ForeignBytes)

	l, err := e.Acquire(ctx, Request{ID: "x", AudioSeconds: 10})
	require.NoError(t, err)
	e.Observe(sample(7*GiB+300*MiB, 6*GiB+300*MiB)) // mid-request: the pool grew
	require.Equal(t, 300*MiB, host().CachedBytes)
	stale := sample(7*GiB, 6*GiB)
	require.NoError(t, l.Done(Outcome{})) // unknown cache: assume it grew to the prediction
	require.Equal(t, l.PredictedBytes, host().CachedBytes)
	e.Observe(stale) // taken before Done: ignored for the host
	require.Equal(t, l.PredictedBytes, host().CachedBytes)
	// Idle, and the pool shrank (IndexTTS empties the cache on a speaker change);
	// the other process gave back half of its memory, which is trusted only once it
	// stays down for the whole window.
	e.Observe(sample(6*GiB+700*MiB, 6*GiB+200*MiB))
	require.Equal(t, 6*GiB, host().ModelBytes)
	require.Equal(t, 200*MiB, host().CachedBytes)
	require.Equal(t, GiB, e.Snapshot()[0].ForeignBytes)
	e.Observe(sample(6*GiB+700*MiB, 6*GiB+200*MiB))
	require.Equal(t, 500*MiB, e.Snapshot()[0].ForeignBytes)

	// A reading below the model: the model estimate was high.
	e.Observe(sample(6*GiB, 5*GiB+512*MiB))
	require.Equal(t, 5*GiB+512*MiB, host().ModelBytes)
	require.Zero(t, host().CachedBytes)
	require.Equal(t, 6*GiB, e.Snapshot()[0].NVMLUsedBytes)
	require.Equal(t, 5*GiB+512*MiB, host().NVMLBytes)
}

func TestBatchingHostTakesSeveralRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := NewExecutor(ExecutorConfig{})
	p := testProfile()
	p.Concurrency, p.LongLaneLimit = 3, 1
	require.NoError(t, e.AddGPU(GPUConfig{UUID: "GPU-a", TotalBytes: 80 * GiB, Profile: p}))
	require.NoError(t, e.AddHost(ctx, "GPU-a", HostSpec{ID: "vllm"}))
	require.NoError(t, e.HostReady("GPU-a", "vllm", ReadyHost{PID: 9, Concurrency: 8}))

	var leases []*Lease
	for i := range 3 {
		l, err := e.Acquire(ctx, Request{ID: fmt.Sprint(i), AudioSeconds: 5})
		require.NoError(t, err)
		require.Equal(t, "vllm", l.HostID)
		require.Equal(t, i, l.Seat())
		leases = append(leases, l)
	}
	// Requests on one host add up: the host's commitment is the sum of their peaks.
	snap := e.Snapshot()[0]
	require.Equal(t, DefaultResidentBytes+3*Calibration{}.PeakBytes(5), snap.CommittedBytes)
	require.Len(t, snap.Hosts[0].Seats, 8)

	waiting := waitSignal(e)
	res := acquireAsync(e, ctx, Request{ID: "fourth", AudioSeconds: 5})
	require.Equal(t, "fourth", <-waiting, "Concurrency caps a batching host too")
	require.NoError(t, leases[1].Done(Outcome{}))
	got := <-res
	require.NoError(t, got.err)
	require.Equal(t, 1, got.lease.Seat())
	for _, l := range []*Lease{leases[0], leases[2], got.lease} {
		require.NoError(t, l.Done(Outcome{}))
	}
}

func TestFollowFeedsSamples(t *testing.T) {
	t.Parallel()
	dev := &fakeDevice{uuid: "GPU-a", used: 30}
	m := NewMonitor(context.Background(), MonitorConfig{Driver: &fakeDriver{devices: []*fakeDevice{dev}}})
	m.SampleNow(context.Background())
	e := NewExecutor(ExecutorConfig{})
	require.NoError(t, e.AddMonitoredGPUs(m, func(d Device) (Profile, Calibration) {
		require.Equal(t, "Fake", d.Name)
		return testProfile(), Calibration{}
	}))
	snap := e.Snapshot()[0]
	require.EqualValues(t, 100, snap.TotalBytes)
	require.EqualValues(t, 30, snap.NVMLUsedBytes)
	require.EqualValues(t, 30, snap.ForeignBytes, "no host is ours yet")

	ch := make(chan []Sample)
	done := make(chan struct{})
	go func() { e.FollowSamples(context.Background(), ch); close(done) }()
	dev.setUsed(60)
	ch <- m.SampleNow(context.Background())
	close(ch)
	<-done
	require.EqualValues(t, 60, e.Snapshot()[0].NVMLUsedBytes)

	// Follow ends with its context.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.Follow(ctx, m)
	require.NoError(t, m.Close())
}
