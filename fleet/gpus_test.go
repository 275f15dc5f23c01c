package fleet_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/fleet"
	"dubstudio/gpu"
	"dubstudio/gpu/calibrate"
	"dubstudio/gpu/ttshost"
	"dubstudio/internal/simdev"
	"dubstudio/tts"
	"dubstudio/workflow"
)

const simGPU = "GPU-sim-test"

type simGPUsOpts struct {
	total     int64
	profile   *gpu.Profile
	cal       gpu.Calibration
	configure func(gpu.LaunchOpts, *tts.SimulatorConfig)
	// ownWeights: the engine's hosts cannot share weights.
	ownWeights bool
	// batching: the engine's hosts can batch (a profile with Batching starts a
	// batching simulator).
	batching bool
}

type simBundle struct {
	gpus *fleet.GPUs
	dev  *simdev.Device
}

// simDeviceMemory reads a simulated card with exact peaks.
type simDeviceMemory struct{ *simdev.Device }

func (d simDeviceMemory) Used() (int64, bool) { return d.Device.Used(), true }

// setupSimGPUs runs fleet.GPUs over one simulated card whose hosts are in-process
// simulators (4.3 GB each, 45 MB + 38 MB per second of audio), and waits for them.
func setupSimGPUs(t *testing.T, o simGPUsOpts) *simBundle {
	t.Helper()
	if o.total == 0 {
		o.total = 24 * gpu.GiB
	}
	ctx := context.Background()
	dev := simdev.New(o.total)
	mon := gpu.NewMonitor(ctx, gpu.MonitorConfig{Interval: 10 * time.Millisecond,
		Driver: ttshost.NewSimDriver(ttshost.SimDevice{UUID: simGPU, Name: "Simulated", Device: dev})})
	launcher := &ttshost.SimLauncher{Devices: map[string]*simdev.Device{simGPU: dev},
		Config: tts.SimulatorConfig{FollowTarget: true, TokensPerSecond: 20000}, Configure: o.configure}
	gpus, err := fleet.NewGPUs(fleet.GPUsConfig{
		Engine: "simulator", Monitor: mon, Simulated: true, Launcher: launcher,
		Memory:       func(string) calibrate.DeviceMemory { return simDeviceMemory{dev} },
		Pool:         gpu.PoolConfig{HealthInterval: 20 * time.Millisecond, RestartBackoff: 10 * time.Millisecond},
		ShareWeights: !o.ownWeights && !o.batching,
		Batching:     o.batching,
	})
	require.NoError(t, err)
	if o.batching {
		launcher.Profile = gpus.LaunchProfile
	}
	if o.profile != nil {
		require.NoError(t, gpus.Apply(simGPU, fleet.Setting{Profile: *o.profile, Calibration: o.cal}))
	}
	gpus.Start(ctx)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, gpus.Stop(sctx))
	})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	info, err := gpus.Model(wctx)
	require.NoError(t, err)
	require.Equal(t, "simulator-1", info.Version)
	return &simBundle{gpus: gpus, dev: dev}
}

// serving waits until n hosts of the GPU serve (a bound on a hang, not a timing).
func (b *simBundle) serving(t *testing.T, n int) gpu.GPUSnapshot {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap := b.gpus.Executor().Snapshot()[0]
		ready := 0
		for _, h := range snap.Hosts {
			if h.State == gpu.HostServing {
				ready++
			}
		}
		if ready == n && len(snap.Hosts) == n {
			return snap
		}
		require.True(t, time.Now().Before(deadline), "want %d serving hosts: %+v", n, snap.Hosts)
		time.Sleep(10 * time.Millisecond)
	}
}

// replaced waits until n hosts that were not in before serve (and no other host
// is left starting or draining).
func (b *simBundle) replaced(t *testing.T, before gpu.GPUSnapshot, n int) gpu.GPUSnapshot {
	t.Helper()
	old := map[int]bool{}
	for _, h := range before.Hosts {
		old[h.PID] = true
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap := b.gpus.Executor().Snapshot()[0]
		fresh, settled := 0, true
		for _, h := range snap.Hosts {
			if h.State != gpu.HostServing {
				settled = false
			} else if !old[h.PID] {
				fresh++
			}
		}
		if fresh == n && settled {
			return snap
		}
		require.True(t, time.Now().Before(deadline), "want %d new hosts: %+v", n, snap.Hosts)
		time.Sleep(10 * time.Millisecond)
	}
}

func metricsOf(s *fleet.GPUs) gpu.GPUMetrics { return s.Executor().Metrics().GPUs[0] }

func synth(ctx context.Context, t *testing.T, s workflow.Permit, secs float64) (tts.Result, error) {
	return s.Engine().Synthesize(ctx, tts.Request{Text: "A line to say.", TargetSeconds: secs,
		OutputPath: filepath.Join(t.TempDir(), "out.wav")})
}

// Mixed lengths from many goroutines on a card whose budget holds the two models
// and about one long line: the card never passes its budget and nothing runs out
// of memory, because admission waits and asks idle hosts to release their caches.
func TestGPUsMixedLengthsStayWithinBudget(t *testing.T) {
	t.Parallel()
	p := gpu.Profile{Name: "tight", Concurrency: 2, ReservePct: 15, LongTextThresholdSec: 15, LongLaneLimit: 1,
		MaxGenSeconds: 30, SegmentTokens: 120, FP16: true}
	total := 11 * gpu.GiB
	// The simulated model's true size: the default (5 GiB) would not fit two hosts
	// and a 30 s line at once, and the profile would refuse those lines.
	cal := gpu.Calibration{ResidentBytes: tts.SimResidentBytes}
	b := setupSimGPUs(t, simGPUsOpts{total: total, profile: &p, cal: cal})
	b.serving(t, 2)
	b.dev.ResetPeak()
	ctx := context.Background()
	lengths := []float64{1, 5, 12, 20, 30}
	var wg sync.WaitGroup
	var failures atomic.Int64
	var firstErr atomic.Value
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for range 6 {
				secs := lengths[r.IntN(len(lengths))]
				s, err := b.gpus.Acquire(ctx, workflow.PermitRequest{LineID: int64(g + 1), AudioSeconds: secs, TextRunes: 14})
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				res, err := synth(ctx, t, s, secs)
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
				s.Done(workflow.Outcome{PeakBytes: res.PeakReservedBytes, Failed: err != nil})
			}
		}()
	}
	wg.Wait()
	require.Zero(t, failures.Load(), "%v", firstErr.Load())
	require.Zero(t, b.dev.OOMs(), "no allocation failed on the card")
	budget := int64(float64(total) * (1 - p.ReservePct/100))
	require.LessOrEqual(t, b.dev.PeakUsed(), budget, "the card never passed its budget")
	m := metricsOf(b.gpus)
	require.EqualValues(t, 48, m.Completed)
	require.Zero(t, m.OOMs)
	require.Positive(t, m.CacheReleases, "long lines fitted by releasing idle hosts' caches")
	require.InDelta(t, 1.0, m.SafetyFactor, 1e-9)
}

func TestGPUsOutOfMemoryRaisesTheSafetyFactor(t *testing.T) {
	t.Parallel()
	var once atomic.Bool
	b := setupSimGPUs(t, simGPUsOpts{configure: func(_ gpu.LaunchOpts, c *tts.SimulatorConfig) {
		c.FaultFunc = func(tts.Request) tts.Fault {
			if once.CompareAndSwap(false, true) {
				return tts.FaultOOM
			}
			return tts.FaultNone
		}
	}})
	ctx := context.Background()
	s, err := b.gpus.Acquire(ctx, workflow.PermitRequest{LineID: 1, AudioSeconds: 4, TextRunes: 14})
	require.NoError(t, err)
	require.Equal(t, simGPU, s.Device())
	_, err = synth(ctx, t, s, 4)
	require.ErrorIs(t, err, tts.ErrOutOfMemory)
	s.Done(workflow.Outcome{OOM: true, Failed: true})
	m := metricsOf(b.gpus)
	require.EqualValues(t, 1, m.OOMs)
	require.InDelta(t, 1.25, m.SafetyFactor, 1e-9, "predictions grow after an OOM")

	// The retry runs and is admitted with the larger prediction.
	s, err = b.gpus.Acquire(ctx, workflow.PermitRequest{LineID: 1, AudioSeconds: 4, TextRunes: 14})
	require.NoError(t, err)
	_, err = synth(ctx, t, s, 4)
	require.NoError(t, err)
	s.Done(workflow.Outcome{})
	require.EqualValues(t, 1, metricsOf(b.gpus).Completed)
}

func TestGPUsRefuseWhatCanNeverRun(t *testing.T) {
	t.Parallel()
	p := gpu.DefaultProfile()
	p.MaxGenSeconds, p.LongTextThresholdSec = 20, 10
	b := setupSimGPUs(t, simGPUsOpts{profile: &p})
	ctx := context.Background()
	s, err := b.gpus.Acquire(ctx, workflow.PermitRequest{LineID: 9, AudioSeconds: 25, TextRunes: 300})
	require.NoError(t, err, "a refusal is a permit that fails the line with its reason")
	require.Empty(t, s.Device())
	_, err = synth(ctx, t, s, 25)
	require.ErrorContains(t, err, "render.too_long")
	s.Done(workflow.Outcome{Failed: true})
	require.Zero(t, metricsOf(b.gpus).Admitted)

	// A speaker preparation asks for 15 s whatever the profile: it is shortened, not refused.
	s, err = b.gpus.Acquire(ctx, workflow.PermitRequest{AudioSeconds: 15})
	require.NoError(t, err)
	require.Equal(t, simGPU, s.Device())
	s.Done(workflow.Outcome{})
}

func TestGPUsNeverFitsInMemory(t *testing.T) {
	t.Parallel()
	b := setupSimGPUs(t, simGPUsOpts{total: 6 * gpu.GiB})
	s, err := b.gpus.Acquire(context.Background(), workflow.PermitRequest{LineID: 3, AudioSeconds: 30, TextRunes: 400})
	require.NoError(t, err)
	_, err = synth(context.Background(), t, s, 30)
	require.ErrorContains(t, err, "gpu.request.never_fits")
}

// A host that hangs is killed when its permit is given back hung; its pool starts a
// new one.
func TestGPUsKillAHungHost(t *testing.T) {
	t.Parallel()
	b := setupSimGPUs(t, simGPUsOpts{})
	before := b.serving(t, 2)
	ctx := context.Background()
	s, err := b.gpus.Acquire(ctx, workflow.PermitRequest{LineID: 1, AudioSeconds: 2, TextRunes: 10})
	require.NoError(t, err)
	s.Done(workflow.Outcome{Hung: true, Failed: true})
	after := b.replaced(t, before, 1)
	require.Len(t, after.Hosts, 2)
	require.EqualValues(t, 1, metricsOf(b.gpus).HostDeaths, "counted once")
}

// Profiles apply live: a higher concurrency starts hosts, fewer drain them, a change of the
// hosts' own settings restarts them, and a profile that cannot fit one host is
// refused with the measured numbers while the GPU keeps its profile.
func TestGPUsApplyProfilesLive(t *testing.T) {
	t.Parallel()
	b := setupSimGPUs(t, simGPUsOpts{})
	b.serving(t, 2)
	p := gpu.DefaultProfile()
	p.Name, p.Concurrency = "wide", 4
	require.NoError(t, b.gpus.Apply(simGPU, fleet.Setting{Profile: p, ProfileID: 7}))
	snap := b.serving(t, 4)
	require.Equal(t, "wide", snap.Profile.Name)

	p.Concurrency = 1
	require.NoError(t, b.gpus.Apply(simGPU, fleet.Setting{Profile: p, ProfileID: 7}))
	b.serving(t, 1)

	one := b.serving(t, 1)
	p.FP16 = !p.FP16
	require.NoError(t, b.gpus.Apply(simGPU, fleet.Setting{Profile: p, ProfileID: 7}))
	restarted := b.replaced(t, one, 1)
	require.Len(t, restarted.Hosts, 1, "the hosts were restarted with the new settings")

	bad := p
	bad.Name, bad.ReservePct = "greedy", 90
	err := b.gpus.Apply(simGPU, fleet.Setting{Profile: bad, ProfileID: 8})
	require.ErrorIs(t, err, gpu.ErrNeverFits)
	live := b.gpus.Live(time.Minute)
	require.Len(t, live.GPUs, 1)
	g := live.GPUs[0]
	require.NotNil(t, g.ProfileProblem)
	require.Equal(t, "gpu.profile.does_not_fit", g.ProfileProblem.Key)
	require.Equal(t, p.Name, g.Snapshot.Profile.Name, "the GPU kept its profile")
	require.EqualValues(t, 7, g.ProfileID)
	require.True(t, live.Simulated)
	require.NotEmpty(t, g.Recent, "samples for the charts")
	require.NotNil(t, g.Latest)
}

func TestGPUsShareWeights(t *testing.T) {
	t.Parallel()
	// Eight hosts on a 24 GiB card: eight 4.3 GB models would not fit, one model and
	// seven 0.6 GB borrowers do.
	p := gpu.Profile{Name: "shared", Concurrency: 8, ReservePct: 5, LongTextThresholdSec: 15, LongLaneLimit: 8,
		MaxGenSeconds: 30, SegmentTokens: 120, FP16: true, ShareWeights: true}
	cal := gpu.Calibration{ResidentBytes: tts.SimResidentBytes, BorrowerBytes: ttshost.SimBorrowerBytes}
	var crashLender atomic.Bool
	b := setupSimGPUs(t, simGPUsOpts{profile: &p, cal: cal, configure: func(o gpu.LaunchOpts, c *tts.SimulatorConfig) {
		if o.Weights == gpu.WeightsLend {
			c.FaultFunc = func(tts.Request) tts.Fault {
				if crashLender.CompareAndSwap(true, false) {
					return tts.FaultCrash
				}
				return tts.FaultNone
			}
		}
	}})
	first := b.serving(t, 8)
	require.Equal(t, int64(tts.SimResidentBytes+7*ttshost.SimBorrowerBytes), b.dev.Used())
	// River hands the worker enough lines for them: 15 hosts of the default
	// prediction (one 5 GiB model, 1 GiB borrowers) fit beside a 30 s line.
	require.Equal(t, 15, b.gpus.Capacity())
	roles := func() map[gpu.WeightsRole]int {
		out := map[gpu.WeightsRole]int{}
		for _, h := range b.gpus.Live(time.Minute).GPUs[0].Pool {
			out[h.Weights]++
		}
		return out
	}
	require.Equal(t, map[gpu.WeightsRole]int{gpu.WeightsLend: 1, gpu.WeightsBorrow: 7}, roles())

	// Eight lines at once, one a host, long ones included: no out-of-memory.
	ctx := context.Background()
	eight := func() []error {
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sl, err := b.gpus.Acquire(ctx, workflow.PermitRequest{LineID: int64(i + 1), AudioSeconds: float64(4 + 3*i), TextRunes: 40})
				if err != nil {
					errs[i] = err
					return
				}
				_, errs[i] = synth(ctx, t, sl, float64(4+3*i))
				sl.Done(workflow.Outcome{Failed: errs[i] != nil})
			}()
		}
		wg.Wait()
		return errs
	}
	for _, err := range eight() {
		require.NoError(t, err)
	}
	require.Zero(t, b.dev.OOMs())

	// The lender crashes: its borrowers go with it, and all eight come back.
	crashLender.Store(true)
	failed := 0
	for _, err := range eight() {
		if err != nil {
			require.ErrorIs(t, err, tts.ErrUnavailable)
			failed++
		}
	}
	require.Positive(t, failed, "the lender's line failed")
	b.replaced(t, first, 8)
	require.Equal(t, map[gpu.WeightsRole]int{gpu.WeightsLend: 1, gpu.WeightsBorrow: 7}, roles())
	require.Zero(t, b.dev.OOMs())

	// Calibrating with shared weights measures a borrower, and fits more hosts than
	// whole models would.
	res, err := b.gpus.Calibrate(ctx, 9, simGPU, p, nil)
	require.NoError(t, err)
	require.Equal(t, int64(ttshost.SimBorrowerBytes), res.BorrowerBytes)
	require.Equal(t, int64(ttshost.SimBorrowerBytes), res.Calibration.BorrowerBytes)
	require.True(t, res.RecommendedProfile.ShareWeights)
	// The count that fits is memory arithmetic; the recommendation also weighs the
	// load test's throughput, which a busy test machine decides, so it is not asserted.
	require.Greater(t, res.ConcurrencyThatFits, 4, "more hosts than four whole models")
	require.Empty(t, res.Failures, "the load test runs every step that fits")
	require.Zero(t, b.dev.OOMs())
}

func TestGPUsRefuseSharedWeightsTheEngineCannotDo(t *testing.T) {
	t.Parallel()
	b := setupSimGPUs(t, simGPUsOpts{ownWeights: true})
	b.serving(t, 2)
	require.Equal(t, 3, b.gpus.Capacity(), "three 5 GiB models fit beside a 30 s line")
	p := gpu.DefaultProfile()
	p.ShareWeights = true
	err := b.gpus.Apply(simGPU, fleet.Setting{Profile: p, ProfileID: 3})
	require.ErrorIs(t, err, gpu.ErrInvalid)
	g := b.gpus.Live(time.Minute).GPUs[0]
	require.NotNil(t, g.ProfileProblem)
	require.Equal(t, "gpu.profile.share_unsupported", g.ProfileProblem.Key)
	require.False(t, g.Snapshot.Profile.ShareWeights, "the GPU kept its profile")
}

func TestGPUsRefuseBatchingTheEngineCannotDo(t *testing.T) {
	t.Parallel()
	b := setupSimGPUs(t, simGPUsOpts{})
	b.serving(t, 2)
	p := gpu.DefaultProfile()
	p.Batching, p.Concurrency = true, 32
	err := b.gpus.Apply(simGPU, fleet.Setting{Profile: p, ProfileID: 4})
	require.ErrorIs(t, err, gpu.ErrInvalid)
	g := b.gpus.Live(time.Minute).GPUs[0]
	require.NotNil(t, g.ProfileProblem)
	require.Equal(t, "gpu.profile.batch_unsupported", g.ProfileProblem.Key)
	require.False(t, g.Snapshot.Profile.Batching, "the GPU kept its profile")
}

// A batching GPU runs one host that decodes the profile's concurrency of lines at once,
// charged only their activations beside its weights and KV pool: never over the
// budget, an out-of-memory error from the host sheds one line as retryable, and a
// profile change restarts the host with the new number of sequences.
func TestGPUsBatchingHost(t *testing.T) {
	t.Parallel()
	p := gpu.DefaultProfile()
	p.Name, p.Batching, p.Concurrency, p.LongLaneLimit, p.KVCacheGiB = "batch", true, 12, 3, 4
	var ooms atomic.Int64
	// Once gated, the simulated host holds each line's first wait (after it has
	// allocated its activations) until twelve lines have allocated, so that the twelve
	// are on the card together however slowly this machine starts them.
	var gated atomic.Bool
	var arrived atomic.Int64
	allIn := make(chan struct{})
	b := setupSimGPUs(t, simGPUsOpts{profile: &p, batching: true, configure: func(_ gpu.LaunchOpts, c *tts.SimulatorConfig) {
		c.FaultFunc = func(r tts.Request) tts.Fault {
			if r.Text == "oom" {
				ooms.Add(1)
				return tts.FaultOOM
			}
			return tts.FaultNone
		}
		c.Sleep = func(ctx context.Context, d time.Duration) error {
			if gated.Load() && d > 0 {
				if arrived.Add(1) == 12 {
					close(allIn)
				}
				select {
				case <-allIn:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return tts.SleepContext(ctx, d)
		}
	}})
	require.Equal(t, gpu.MaxBatchSequences, b.gpus.Capacity(), "River may hand a batching GPU its sequences")
	snap := b.serving(t, 1)
	require.Len(t, snap.Hosts, 1, "one batching host, not one per seat")
	// The host holds its weights and its 4 GiB KV pool.
	require.Equal(t, tts.SimResidentBytes+4*gpu.GiB, b.dev.Used())
	b.dev.ResetPeak()

	// Twelve lines in flight at once on the one host; the thirteenth waits for a
	// sequence; long lines keep to the long lane's three.
	ctx := context.Background()
	gated.Store(true)
	var held []workflow.Permit
	for i := range 12 {
		s, err := b.gpus.Acquire(ctx, workflow.PermitRequest{LineID: int64(i + 1), AudioSeconds: 6, TextRunes: 60})
		require.NoError(t, err)
		require.Equal(t, simGPU, s.Device())
		held = append(held, s)
	}
	snap = b.gpus.Executor().Snapshot()[0]
	require.Len(t, snap.Hosts, 1)
	require.Equal(t, 12, snap.Running)
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := b.gpus.Acquire(wctx, workflow.PermitRequest{LineID: 13, AudioSeconds: 6, TextRunes: 60})
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "a thirteenth line waits for a sequence")
	var wg sync.WaitGroup
	var failures atomic.Int64
	for _, s := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := synth(ctx, t, s, 6)
			if err != nil || res.Sequence == nil {
				failures.Add(1)
			}
			s.Done(workflow.Outcome{PeakBytes: res.PeakAllocatedBytes, Failed: err != nil})
		}()
	}
	wg.Wait()
	require.Zero(t, failures.Load())
	require.Zero(t, b.dev.OOMs())
	budget := p.Budget(24*gpu.GiB, 0)
	require.LessOrEqual(t, b.dev.PeakUsed(), budget, "the card never passed its budget")
	// Each line was charged its activations (12 MB a second), not a process host's peak.
	require.Equal(t, tts.SimResidentBytes+4*gpu.GiB+12*6*tts.SimActivationBytesPerSecond, b.dev.PeakUsed())

	// Long lines: at most the long lane's three at once.
	var long []workflow.Permit
	for i := range 3 {
		s, err := b.gpus.Acquire(ctx, workflow.PermitRequest{LineID: int64(20 + i), AudioSeconds: 20, TextRunes: 200})
		require.NoError(t, err)
		long = append(long, s)
	}
	wctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = b.gpus.Acquire(wctx, workflow.PermitRequest{LineID: 23, AudioSeconds: 20, TextRunes: 200})
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "a fourth long line waits for the long lane")
	for _, s := range long {
		s.Done(workflow.Outcome{})
	}

	// An out-of-memory error inside the batch fails that line as out of memory,
	// which the worker retries; the host keeps serving.
	s, err := b.gpus.Acquire(ctx, workflow.PermitRequest{LineID: 30, AudioSeconds: 4, TextRunes: 14})
	require.NoError(t, err)
	_, err = s.Engine().Synthesize(ctx, tts.Request{Text: "oom", TargetSeconds: 4, OutputPath: filepath.Join(t.TempDir(), "o.wav")})
	require.ErrorIs(t, err, tts.ErrOutOfMemory, "the worker retries it (Outcome.OOM)")
	s.Done(workflow.Outcome{OOM: true, Failed: true})
	require.EqualValues(t, 1, ooms.Load())
	s, err = b.gpus.Acquire(ctx, workflow.PermitRequest{LineID: 31, AudioSeconds: 4, TextRunes: 14})
	require.NoError(t, err)
	_, err = synth(ctx, t, s, 4)
	require.NoError(t, err)
	s.Done(workflow.Outcome{})

	// Fewer sequences, applied live: the host restarts after its work with the new
	// concurrency.
	before := b.serving(t, 1)
	p.Concurrency, p.LongLaneLimit = 4, 2
	require.NoError(t, b.gpus.Apply(simGPU, fleet.Setting{Profile: p, ProfileID: 5}))
	after := b.replaced(t, before, 1)
	require.Len(t, after.Hosts, 1)
	for i := range 4 {
		s, err := b.gpus.Acquire(ctx, workflow.PermitRequest{LineID: int64(40 + i), AudioSeconds: 2, TextRunes: 14})
		require.NoError(t, err)
		defer s.Done(workflow.Outcome{})
	}
	wctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = b.gpus.Acquire(wctx, workflow.PermitRequest{LineID: 44, AudioSeconds: 2, TextRunes: 14})
	require.ErrorIs(t, err, context.DeadlineExceeded, "four sequences now")
}

// The s2mel precision is a flag of the batching host's command line: changing it
// applies live by restarting the host, which starts with the new precision.
func TestGPUsBatchingHostRestartsForTheS2melPrecision(t *testing.T) {
	t.Parallel()
	p := gpu.DefaultProfile()
	p.Name, p.Batching, p.Concurrency, p.KVCacheGiB = "batch", true, 8, 2
	var (
		gpus     atomic.Pointer[fleet.GPUs]
		mu       sync.Mutex
		launched []string // the s2mel precision of each host started after setup
	)
	b := setupSimGPUs(t, simGPUsOpts{profile: &p, batching: true, configure: func(opts gpu.LaunchOpts, _ *tts.SimulatorConfig) {
		if g := gpus.Load(); g != nil {
			mu.Lock()
			defer mu.Unlock()
			launched = append(launched, g.LaunchProfile(opts.GPU).S2melPrecisionOrDefault())
		}
	}})
	gpus.Store(b.gpus)
	before := b.serving(t, 1)
	p.S2melPrecision = gpu.S2melBF16
	require.NoError(t, b.gpus.Apply(simGPU, fleet.Setting{Profile: p, ProfileID: 7}))
	after := b.replaced(t, before, 1)
	require.Len(t, after.Hosts, 1)
	mu.Lock()
	require.Equal(t, []string{gpu.S2melBF16}, launched, "the new host started with the new precision")
	mu.Unlock()
	require.Contains(t, ttshost.BatchArgs(b.gpus.LaunchProfile(simGPU)), gpu.S2melBF16, "on its command line")

	// The same precision again restarts nothing.
	require.NoError(t, b.gpus.Apply(simGPU, fleet.Setting{Profile: p, ProfileID: 7}))
	require.Equal(t, after.Hosts[0].PID, b.serving(t, 1).Hosts[0].PID)
	mu.Lock()
	require.Len(t, launched, 1)
	mu.Unlock()
}
