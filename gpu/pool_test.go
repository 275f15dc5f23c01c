//go:build unix

package gpu

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type poolBundle struct {
	e      *Executor
	pool   *Pool
	events chan HostEvent
	ctx    context.Context
	cancel context.CancelFunc
}

// setupPool runs a pool of `sleep` processes on a fake GPU "GPU-test".
func setupPool(t *testing.T, launcher *cmdLauncher, cfg PoolConfig, n int) *poolBundle {
	t.Helper()
	b := newTestPool(t, launcher, cfg)
	b.pool.Start(b.ctx, n)
	return b
}

// newTestPool is setupPool's pool before it starts.
func newTestPool(t *testing.T, launcher *cmdLauncher, cfg PoolConfig) *poolBundle {
	t.Helper()
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep binary")
	}
	e := NewExecutor(ExecutorConfig{})
	require.NoError(t, e.AddGPU(GPUConfig{UUID: "GPU-test", TotalBytes: 80 * GiB, Profile: testProfile()}))
	if launcher.Command == nil {
		launcher.Command = func(LaunchOpts) (*exec.Cmd, error) { return exec.Command("sleep", "300"), nil }
	}
	events := make(chan HostEvent, 64)
	cfg.GPU, cfg.Launcher, cfg.Registry = "GPU-test", launcher, e
	cfg.RestartBackoff = time.Millisecond
	cfg.OnEvent = func(ev HostEvent) { events <- ev }
	pool, err := NewPool(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	b := &poolBundle{e: e, pool: pool, events: events, ctx: ctx, cancel: cancel}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		require.NoError(t, pool.Stop(sctx))
		cancel()
	})
	return b
}

// next returns the next event of kind, skipping others.
func (b *poolBundle) next(t *testing.T, kind HostEventKind) HostEvent {
	t.Helper()
	for ev := range b.events {
		if ev.Kind == kind {
			return ev
		}
	}
	t.Fatal("events closed")
	return HostEvent{}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestPoolRestartsAHostKilledByTheOS(t *testing.T) {
	t.Parallel()
	memory := func(pid int) (int64, bool) { return int64(pid) * MiB, true } // the monitor's reading
	b := setupPool(t, &cmdLauncher{}, PoolConfig{HealthInterval: time.Hour, ProcessMemory: memory}, 2)
	first := b.next(t, EventStarted)
	second := b.next(t, EventStarted)
	require.NotEqual(t, first.PID, second.PID)
	require.True(t, alive(first.PID))

	if env, err := os.ReadFile("/proc/" + strconv.Itoa(first.PID) + "/environ"); err == nil {
		vars := strings.Split(string(env), "\x00")
		require.Contains(t, vars, "CUDA_VISIBLE_DEVICES=GPU-test")
		require.Contains(t, vars, "CUDA_DEVICE_ORDER=PCI_BUS_ID")
	}

	// Work runs on both hosts; then the OS kills one of them (kill -9).
	ctx := context.Background()
	l1, err := b.e.Acquire(ctx, Request{ID: "a", AudioSeconds: 3})
	require.NoError(t, err)
	l2, err := b.e.Acquire(ctx, Request{ID: "b", AudioSeconds: 3})
	require.NoError(t, err)
	victim, other := l1, l2
	if victim.HostPID != first.PID {
		victim, other = l2, l1
	}
	require.Equal(t, first.PID, victim.HostPID)
	require.NoError(t, syscall.Kill(first.PID, syscall.SIGKILL))

	died := b.next(t, EventExited)
	require.Equal(t, first.ID, died.ID)
	require.ErrorContains(t, died.Err, "signal: killed")
	<-victim.Lost()
	err = victim.Done(Outcome{})
	require.True(t, IsRetryable(err))
	var re *RetryableError
	require.ErrorAs(t, err, &re)
	require.Equal(t, ReasonHostDied, re.Reason)

	again := b.next(t, EventStarted)
	require.Equal(t, first.ID, again.ID)
	require.NotEqual(t, first.PID, again.PID)
	require.Equal(t, 1, again.Restarts)
	require.NoError(t, other.Done(Outcome{}))

	// The replacement serves.
	var pids []int
	for _, h := range b.e.Snapshot()[0].Hosts {
		require.Equal(t, HostServing, h.State)
		pids = append(pids, h.PID)
	}
	require.ElementsMatch(t, []int{again.PID, second.PID}, pids)
	st := b.pool.Status()
	require.Len(t, st, 2)
	for _, h := range st {
		if h.ID != first.ID {
			require.Zero(t, h.Restarts)
			continue
		}
		require.Equal(t, 1, h.Restarts)
		require.Contains(t, h.LastError, "signal: killed")
		require.Equal(t, again.PID, h.PID)
		require.Equal(t, HostServing, h.State)
		require.Equal(t, int64(again.PID)*MiB, h.ResidentBytes)
	}
}

func TestPoolResizeDrainsBeforeStopping(t *testing.T) {
	t.Parallel()
	b := setupPool(t, &cmdLauncher{}, PoolConfig{HealthInterval: time.Hour}, 1)
	b.next(t, EventStarted)
	b.pool.Resize(3)
	b.next(t, EventStarted)
	b.next(t, EventStarted)
	require.Equal(t, 3, b.pool.Size())

	ctx := context.Background()
	var leases []*Lease
	for range 3 {
		l, err := b.e.Acquire(ctx, Request{ID: "x", AudioSeconds: 3})
		require.NoError(t, err)
		leases = append(leases, l)
	}
	require.NoError(t, leases[0].Done(Outcome{}))
	require.NoError(t, leases[1].Done(Outcome{}))
	busyPID := leases[2].HostPID

	b.pool.Resize(1)
	stopped := b.next(t, EventStopped) // the idle host goes at once
	require.Equal(t, "GPU-test/1", stopped.ID)
	require.True(t, alive(busyPID), "a busy host drains first")
	require.NoError(t, leases[2].Done(Outcome{}))
	stopped = b.next(t, EventStopped)
	require.Equal(t, "GPU-test/2", stopped.ID)
	require.Len(t, b.e.Snapshot()[0].Hosts, 1)
}

func TestPoolRestartsAnUnhealthyHost(t *testing.T) {
	t.Parallel()
	var sick atomic.Bool
	launcher := &cmdLauncher{Health: func(ctx context.Context, h *cmdHost) error {
		if sick.Load() {
			return errors.New("no answer")
		}
		return nil
	}}
	b := setupPool(t, launcher, PoolConfig{HealthInterval: time.Millisecond, HealthFailures: 2}, 1)
	first := b.next(t, EventStarted)
	sick.Store(true)
	ev := b.next(t, EventUnhealthy)
	require.ErrorContains(t, ev.Err, "failed 2 health checks")
	require.False(t, alive(first.PID) && processIsOurChild(first.PID), "the sick host was killed")
	sick.Store(false)
	again := b.next(t, EventStarted)
	require.NotEqual(t, first.PID, again.PID)
}

// processIsOurChild reports whether pid is still a live (not zombie) process.
func processIsOurChild(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat))
	return len(fields) > 2 && fields[2] != "Z"
}

func TestPoolRetriesAFailedLaunch(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	launcher := &cmdLauncher{Command: func(LaunchOpts) (*exec.Cmd, error) {
		if calls.Add(1) == 1 {
			return exec.Command("/nonexistent/model-host"), nil
		}
		return exec.Command("sleep", "300"), nil
	}}
	b := setupPool(t, launcher, PoolConfig{HealthInterval: time.Hour}, 1)
	failed := b.next(t, EventLaunchFailed)
	require.Error(t, failed.Err)
	b.next(t, EventStarted)
	require.Len(t, b.e.Snapshot()[0].Hosts, 1)
}

// A host that never becomes ready (a model load that hangs) is killed after
// StartTimeout and started again, instead of holding its seat in "starting".
func TestPoolRestartsAHostThatIsNotReadyInTime(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	var hung atomic.Int64
	launcher := &cmdLauncher{Ready: func(ctx context.Context, h *cmdHost) error {
		if calls.Add(1) == 1 {
			hung.Store(int64(h.PID()))
			<-ctx.Done() // the first never loads
			return ctx.Err()
		}
		return nil
	}}
	b := setupPool(t, launcher, PoolConfig{HealthInterval: time.Hour, StartTimeout: 200 * time.Millisecond}, 1)
	failed := b.next(t, EventLaunchFailed)
	require.ErrorIs(t, failed.Err, context.DeadlineExceeded)
	require.ErrorContains(t, failed.Err, "not ready within 200ms")
	require.False(t, processIsOurChild(int(hung.Load())), "the hung host was killed")
	started := b.next(t, EventStarted)
	require.NotEqual(t, int(hung.Load()), started.PID)
	require.Len(t, b.e.Snapshot()[0].Hosts, 1)
}

func TestPoolStopAndContextEnd(t *testing.T) {
	t.Parallel()
	b := setupPool(t, &cmdLauncher{}, PoolConfig{HealthInterval: time.Hour}, 2)
	p1 := b.next(t, EventStarted).PID
	p2 := b.next(t, EventStarted).PID
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.pool.Stop(ctx))
	require.False(t, processIsOurChild(p1))
	require.False(t, processIsOurChild(p2))
	require.Empty(t, b.e.Snapshot()[0].Hosts)
	require.Empty(t, b.pool.Status())

	// A pool whose context ends stops its hosts without draining.
	c := setupPool(t, &cmdLauncher{}, PoolConfig{HealthInterval: time.Hour}, 1)
	pid := c.next(t, EventStarted).PID
	l, err := c.e.Acquire(context.Background(), Request{ID: "busy", AudioSeconds: 2})
	require.NoError(t, err)
	c.cancel()
	c.next(t, EventStopped)
	<-l.Lost()
	require.False(t, processIsOurChild(pid))
}

func TestNewPoolNeedsLauncherAndRegistry(t *testing.T) {
	t.Parallel()
	_, err := NewPool(PoolConfig{GPU: "GPU-x"})
	require.ErrorIs(t, err, ErrInvalid)
}

func TestPoolSharedWeights(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	roles := map[string][]WeightsRole{} // by host ID, in launch order
	launcher := &cmdLauncher{Command: func(o LaunchOpts) (*exec.Cmd, error) {
		mu.Lock()
		roles[o.ID] = append(roles[o.ID], o.Weights)
		mu.Unlock()
		return exec.Command("sleep", "300"), nil
	}}
	b := newTestPool(t, launcher, PoolConfig{HealthInterval: time.Hour})
	require.NoError(t, b.e.SetCalibration("GPU-test", Calibration{ResidentBytes: 5 * GiB, BorrowerBytes: GiB / 2}))
	b.pool.SetShareWeights(true)
	b.pool.Start(b.ctx, 3)

	// The lender serves before any borrower starts.
	lender := b.next(t, EventStarted)
	require.Equal(t, "GPU-test/0", lender.ID)
	b.next(t, EventStarted)
	b.next(t, EventStarted)
	mu.Lock()
	require.Equal(t, map[string][]WeightsRole{"GPU-test/0": {WeightsLend}, "GPU-test/1": {WeightsBorrow},
		"GPU-test/2": {WeightsBorrow}}, roles)
	mu.Unlock()
	models := map[string]int64{}
	for _, h := range b.e.Snapshot()[0].Hosts {
		models[h.ID] = h.ModelBytes
	}
	require.Equal(t, map[string]int64{"GPU-test/0": 5 * GiB, "GPU-test/1": GiB / 2, "GPU-test/2": GiB / 2}, models)
	for _, h := range b.pool.Status() {
		require.Equal(t, map[bool]WeightsRole{true: WeightsLend, false: WeightsBorrow}[h.Index == 0], h.Weights)
	}

	// The lender dies: its borrowers are killed with it, and all come back, the
	// borrowers mapping the new lender's weights.
	require.NoError(t, syscall.Kill(lender.PID, syscall.SIGKILL))
	var gone []string
	var starts []HostEvent // the new lender may start before the last borrower's exit is reported
	for len(gone) < 3 || len(starts) < 3 {
		switch ev := <-b.events; ev.Kind {
		case EventExited:
			if ev.ID != lender.ID {
				require.ErrorIs(t, ev.Err, ErrLenderGone)
			}
			gone = append(gone, ev.ID)
		case EventStarted:
			starts = append(starts, ev)
		}
	}
	require.ElementsMatch(t, []string{"GPU-test/0", "GPU-test/1", "GPU-test/2"}, gone)
	again := starts[0]
	require.Equal(t, "GPU-test/0", again.ID, "the lender starts first")
	mu.Lock()
	require.Equal(t, []WeightsRole{WeightsLend, WeightsLend}, roles["GPU-test/0"])
	require.Equal(t, []WeightsRole{WeightsBorrow, WeightsBorrow}, roles["GPU-test/1"])
	mu.Unlock()

	// Stopping: a borrower busy with a line drains, and the lender waits for it.
	l, err := b.e.Acquire(context.Background(), Request{ID: "x", AudioSeconds: 2})
	require.NoError(t, err)
	busy := l.HostPID
	for l.HostPID == again.PID { // keep a borrower busy, not the lender
		l2, err := b.e.Acquire(context.Background(), Request{ID: "y", AudioSeconds: 2})
		require.NoError(t, err)
		require.NoError(t, l.Done(Outcome{}))
		l, busy = l2, l2.HostPID
	}
	b.pool.Resize(0)
	b.next(t, EventStopped) // the idle borrower
	require.True(t, alive(again.PID), "the lender outlives a draining borrower")
	require.True(t, alive(busy))
	require.NoError(t, l.Done(Outcome{}))
	b.next(t, EventStopped)
	last := b.next(t, EventStopped)
	require.Equal(t, "GPU-test/0", last.ID)
}

func TestPoolBorrowersWaitForALenderThatFailsToStart(t *testing.T) {
	t.Parallel()
	var lenderLaunches atomic.Int32
	launcher := &cmdLauncher{Command: func(o LaunchOpts) (*exec.Cmd, error) {
		if o.Weights == WeightsLend && lenderLaunches.Add(1) == 1 {
			return exec.Command("/nonexistent/model-host"), nil
		}
		return exec.Command("sleep", "300"), nil
	}}
	b := newTestPool(t, launcher, PoolConfig{HealthInterval: time.Hour})
	b.pool.SetShareWeights(true)
	b.pool.Start(b.ctx, 3)

	failed := b.next(t, EventLaunchFailed)
	require.Equal(t, "GPU-test/0", failed.ID)
	// The borrowers wait through the failure and start once the second lender serves.
	started := b.next(t, EventStarted)
	require.Equal(t, "GPU-test/0", started.ID)
	b.next(t, EventStarted)
	b.next(t, EventStarted)
	require.EqualValues(t, 2, lenderLaunches.Load())
	for _, h := range b.pool.Status() {
		require.Equal(t, HostServing, h.State)
	}
}

// launchFunc is a HostLauncher of one function.
type launchFunc func(ctx context.Context, opts LaunchOpts) (Host, error)

func (f launchFunc) Launch(ctx context.Context, opts LaunchOpts) (Host, error) { return f(ctx, opts) }

// LaunchPinned pins the host to its GPU and names the bound a slow host ran past; a
// launch the caller gave up on is not called slow.
func TestLaunchPinned(t *testing.T) {
	t.Parallel()
	var got LaunchOpts
	hang := launchFunc(func(ctx context.Context, opts LaunchOpts) (Host, error) {
		got = opts
		<-ctx.Done()
		return nil, ctx.Err()
	})
	_, err := LaunchPinned(context.Background(), hang, LaunchOpts{GPU: "GPU-x", Env: []string{"A=1"}}, 50*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "not ready within 50ms")
	require.Equal(t, []string{"A=1", "CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=GPU-x"}, got.Env)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = LaunchPinned(ctx, hang, LaunchOpts{GPU: "GPU-x"}, time.Hour)
	require.ErrorIs(t, err, context.Canceled)
	require.NotContains(t, err.Error(), "not ready within")
}
