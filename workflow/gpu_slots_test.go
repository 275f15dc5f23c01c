package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/gpu"
	"dubstudio/gpu/calibrate"
	"dubstudio/gpu/simdev"
	"dubstudio/gpu/ttshost"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/tts"
	"dubstudio/workflow"
)

const simGPU = "GPU-sim-test"

type simSlotsOpts struct {
	total     int64
	profile   *gpu.Profile
	cal       gpu.Calibration
	configure func(gpu.LaunchOpts, *tts.SimulatorConfig)
	// ownWeights: the engine's hosts cannot share weights.
	ownWeights bool
}

type simBundle struct {
	slots *workflow.GPUSlots
	dev   *simdev.Device
}

// simDeviceMemory reads a simulated card with exact peaks.
type simDeviceMemory struct{ *simdev.Device }

func (d simDeviceMemory) Used() (int64, bool) { return d.Device.Used(), true }

// setupSimSlots runs GPU slots over one simulated card whose hosts are in-process
// simulators (4.3 GB each, 45 MB + 38 MB per second of audio), and waits for them.
func setupSimSlots(t *testing.T, o simSlotsOpts) *simBundle {
	t.Helper()
	if o.total == 0 {
		o.total = 24 * gpu.GiB
	}
	ctx := context.Background()
	dev := simdev.New(o.total)
	mon := gpu.NewMonitor(ctx, gpu.MonitorConfig{Interval: 10 * time.Millisecond,
		Driver: gpu.NewSimDriver(gpu.SimDevice{UUID: simGPU, Name: "Simulated", Device: dev})})
	slots, err := workflow.NewGPUSlots(workflow.GPUSlotsConfig{
		Engine: "simulator", Monitor: mon, Simulated: true,
		Launcher: &ttshost.SimLauncher{Devices: map[string]*simdev.Device{simGPU: dev},
			Config: tts.SimulatorConfig{FollowTarget: true, TokensPerSecond: 20000}, Configure: o.configure},
		Memory:       func(string) calibrate.DeviceMemory { return simDeviceMemory{dev} },
		Pool:         gpu.PoolConfig{HealthInterval: 20 * time.Millisecond, RestartBackoff: 10 * time.Millisecond},
		ShareWeights: !o.ownWeights,
	})
	require.NoError(t, err)
	if o.profile != nil {
		require.NoError(t, slots.Apply(simGPU, workflow.GPUSetting{Profile: *o.profile, Calibration: o.cal}))
	}
	slots.Start(ctx)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = slots.Stop(sctx)
	})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	info, err := slots.Model(wctx)
	require.NoError(t, err)
	require.Equal(t, "simulator-1", info.Version)
	return &simBundle{slots: slots, dev: dev}
}

// serving waits until n hosts of the GPU serve (a bound on a hang, not a timing).
func (b *simBundle) serving(t *testing.T, n int) gpu.GPUSnapshot {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap := b.slots.Executor().Snapshot()[0]
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
		snap := b.slots.Executor().Snapshot()[0]
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

func metricsOf(s *workflow.GPUSlots) gpu.GPUMetrics { return s.Executor().Metrics().GPUs[0] }

func synth(ctx context.Context, t *testing.T, s workflow.Permit, secs float64) (tts.Result, error) {
	return s.Engine().Synthesize(ctx, tts.Request{Text: "A line to say.", TargetSeconds: secs,
		OutputPath: filepath.Join(t.TempDir(), "out.wav")})
}

// Mixed lengths from many goroutines on a card whose budget holds the two models
// and about one long line: the card never passes its budget and nothing runs out
// of memory, because admission waits and asks idle hosts to release their caches.
func TestGPUSlotsMixedLengthsStayWithinBudget(t *testing.T) {
	t.Parallel()
	p := gpu.Profile{Name: "tight", MaxSlots: 2, ReservePct: 15, LongTextThresholdSec: 15, LongLaneLimit: 1,
		MaxGenSeconds: 30, SegmentTokens: 120, FP16: true}
	total := 11 * gpu.GiB
	// The simulated model's true size: the default (5 GiB) would not fit two slots
	// and a 30 s line at once, and the profile would refuse those lines.
	cal := gpu.Calibration{ResidentBytes: tts.SimResidentBytes}
	b := setupSimSlots(t, simSlotsOpts{total: total, profile: &p, cal: cal})
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
				s, err := b.slots.Acquire(ctx, workflow.PermitRequest{LineID: int64(g + 1), AudioSeconds: secs, TextRunes: 14})
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
	m := metricsOf(b.slots)
	require.EqualValues(t, 48, m.Completed)
	require.Zero(t, m.OOMs)
	require.Positive(t, m.CacheReleases, "long lines fitted by releasing idle hosts' caches")
	require.InDelta(t, 1.0, m.SafetyFactor, 1e-9)
}

func TestGPUSlotsOutOfMemoryRaisesTheSafetyFactor(t *testing.T) {
	t.Parallel()
	var once atomic.Bool
	b := setupSimSlots(t, simSlotsOpts{configure: func(_ gpu.LaunchOpts, c *tts.SimulatorConfig) {
		c.FaultFunc = func(tts.Request) tts.Fault {
			if once.CompareAndSwap(false, true) {
				return tts.FaultOOM
			}
			return tts.FaultNone
		}
	}})
	ctx := context.Background()
	s, err := b.slots.Acquire(ctx, workflow.PermitRequest{LineID: 1, AudioSeconds: 4, TextRunes: 14})
	require.NoError(t, err)
	require.Equal(t, simGPU, s.Device())
	_, err = synth(ctx, t, s, 4)
	require.ErrorIs(t, err, tts.ErrOutOfMemory)
	s.Done(workflow.Outcome{OOM: true, Failed: true})
	m := metricsOf(b.slots)
	require.EqualValues(t, 1, m.OOMs)
	require.InDelta(t, 1.25, m.SafetyFactor, 1e-9, "predictions grow after an OOM")

	// The retry runs and is admitted with the larger prediction.
	s, err = b.slots.Acquire(ctx, workflow.PermitRequest{LineID: 1, AudioSeconds: 4, TextRunes: 14})
	require.NoError(t, err)
	_, err = synth(ctx, t, s, 4)
	require.NoError(t, err)
	s.Done(workflow.Outcome{})
	require.EqualValues(t, 1, metricsOf(b.slots).Completed)
}

func TestGPUSlotsRefuseWhatCanNeverRun(t *testing.T) {
	t.Parallel()
	p := gpu.DefaultProfile()
	p.MaxGenSeconds, p.LongTextThresholdSec = 20, 10
	b := setupSimSlots(t, simSlotsOpts{profile: &p})
	ctx := context.Background()
	s, err := b.slots.Acquire(ctx, workflow.PermitRequest{LineID: 9, AudioSeconds: 25, TextRunes: 300})
	require.NoError(t, err, "a refusal is a slot that fails the line with its reason")
	require.Empty(t, s.Device())
	_, err = synth(ctx, t, s, 25)
	require.ErrorContains(t, err, "render.too_long")
	s.Done(workflow.Outcome{Failed: true})
	require.Zero(t, metricsOf(b.slots).Admitted)

	// A speaker preparation asks for 15 s whatever the profile: it is shortened, not refused.
	s, err = b.slots.Acquire(ctx, workflow.PermitRequest{AudioSeconds: 15})
	require.NoError(t, err)
	require.Equal(t, simGPU, s.Device())
	s.Done(workflow.Outcome{})
}

func TestGPUSlotsNeverFitsInMemory(t *testing.T) {
	t.Parallel()
	b := setupSimSlots(t, simSlotsOpts{total: 6 * gpu.GiB})
	s, err := b.slots.Acquire(context.Background(), workflow.PermitRequest{LineID: 3, AudioSeconds: 30, TextRunes: 400})
	require.NoError(t, err)
	_, err = synth(context.Background(), t, s, 30)
	require.ErrorContains(t, err, "gpu.request.never_fits")
}

// A host that hangs is killed when its slot is given back hung; its pool starts a
// new one.
func TestGPUSlotsKillAHungHost(t *testing.T) {
	t.Parallel()
	b := setupSimSlots(t, simSlotsOpts{})
	before := b.serving(t, 2)
	ctx := context.Background()
	s, err := b.slots.Acquire(ctx, workflow.PermitRequest{LineID: 1, AudioSeconds: 2, TextRunes: 10})
	require.NoError(t, err)
	s.Done(workflow.Outcome{Hung: true, Failed: true})
	after := b.replaced(t, before, 1)
	require.Len(t, after.Hosts, 2)
	require.EqualValues(t, 1, metricsOf(b.slots).HostDeaths, "counted once")
}

// Profiles apply live: more slots start hosts, fewer drain them, a change of the
// hosts' own settings restarts them, and a profile that cannot fit one slot is
// refused with the measured numbers while the GPU keeps its profile.
func TestGPUSlotsApplyProfilesLive(t *testing.T) {
	t.Parallel()
	b := setupSimSlots(t, simSlotsOpts{})
	b.serving(t, 2)
	p := gpu.DefaultProfile()
	p.Name, p.MaxSlots = "wide", 4
	require.NoError(t, b.slots.Apply(simGPU, workflow.GPUSetting{Profile: p, ProfileID: 7}))
	snap := b.serving(t, 4)
	require.Equal(t, "wide", snap.Profile.Name)

	p.MaxSlots = 1
	require.NoError(t, b.slots.Apply(simGPU, workflow.GPUSetting{Profile: p, ProfileID: 7}))
	b.serving(t, 1)

	one := b.serving(t, 1)
	p.FP16 = !p.FP16
	require.NoError(t, b.slots.Apply(simGPU, workflow.GPUSetting{Profile: p, ProfileID: 7}))
	restarted := b.replaced(t, one, 1)
	require.Len(t, restarted.Hosts, 1, "the hosts were restarted with the new settings")

	bad := p
	bad.Name, bad.ReservePct = "greedy", 90
	err := b.slots.Apply(simGPU, workflow.GPUSetting{Profile: bad, ProfileID: 8})
	require.ErrorIs(t, err, gpu.ErrNeverFits)
	live := b.slots.Live(time.Minute)
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

func TestGPUSlotsCalibrateTakesTheGPUAndGivesItBack(t *testing.T) {
	t.Parallel()
	b := setupSimSlots(t, simSlotsOpts{})
	b.serving(t, 2)
	p := gpu.Profile{Name: "cal", MaxSlots: 2, ReservePct: 15, LongTextThresholdSec: 4, LongLaneLimit: 1,
		MaxGenSeconds: 6, SegmentTokens: 120, FP16: true}
	var keys []string
	res, err := b.slots.Calibrate(context.Background(), 42, simGPU, p, func(k string, _ ...any) { keys = append(keys, k) })
	require.NoError(t, err)
	require.Equal(t, "gpu.calibration.progress.waiting", keys[0])
	require.True(t, res.Calibration.Calibrated())
	require.Positive(t, res.Recommended)
	require.NotEmpty(t, res.Verdict.Steps)
	require.Equal(t, res.Recommended, res.RecommendedProfile.LongLaneLimit,
		"24 GiB hold every slot's longest line: no long lane needed")
	b.serving(t, 2)
}

func TestGPUSlotsCalibrationLoadTestRunsThroughTheExecutor(t *testing.T) {
	t.Parallel()
	// 13.6 GB with a 1% reserve: three 4.3 GB models and one 30 s line fit; three
	// hosts that each kept a 30 s line's cache do not. The source documents' load test
	// (each host on its own, caches kept) fails at three; through the executor three
	// are clean.
	const total = 13_600_000_000
	p := gpu.Profile{Name: "tight", MaxSlots: 2, ReservePct: 1, LongTextThresholdSec: 15, LongLaneLimit: 1,
		MaxGenSeconds: 30, SegmentTokens: 120, FP16: true}

	unmanaged := simdev.New(total)
	launcher := &ttshost.SimLauncher{Devices: map[string]*simdev.Device{simGPU: unmanaged},
		Config: tts.SimulatorConfig{FollowTarget: true, TokensPerSecond: 20000}}
	old, err := calibrate.Run(context.Background(), calibrate.Config{GPU: gpu.Device{UUID: simGPU, TotalBytes: total},
		Profile: p, Device: simDeviceMemory{unmanaged}, MaxSlots: 3,
		Launch: func(ctx context.Context, i int) (calibrate.Host, error) {
			return launcher.LaunchHost(ctx, gpu.LaunchOpts{GPU: simGPU, ID: fmt.Sprintf("cal%d", i)})
		}})
	require.NoError(t, err)
	require.Equal(t, 3, old.Verdict.CrashAt, "unmanaged, three hosts run out of memory")

	b := setupSimSlots(t, simSlotsOpts{total: total, profile: &p})
	b.serving(t, 2)
	res, err := b.slots.Calibrate(context.Background(), 7, simGPU, p, nil)
	require.NoError(t, err)
	v := res.Verdict
	require.Zero(t, v.CrashAt, "no step failed: %+v", res.Failures)
	require.Zero(t, b.dev.OOMs(), "the card never ran out of memory")
	require.Equal(t, 3, res.Verdict.Steps[len(v.Steps)-1].Slots, "the load test went up to the hosts that fit")
	for _, st := range v.Steps {
		require.LessOrEqual(t, st.PeakVRAMBytes, int64(total))
	}
	require.GreaterOrEqual(t, res.Recommended, 2)
	require.Equal(t, 1, gpu.LongLinesThatFit(p, res.Calibration, 3, total, 0), "room for one 30 s line beside three models")
	// Applied at once: the calibration's hosts, gone, are not counted as another
	// program's memory.
	require.NoError(t, b.slots.Apply(simGPU, workflow.GPUSetting{Profile: res.RecommendedProfile,
		Calibration: res.Calibration, CalibrationID: 7}))
	b.serving(t, res.Recommended)
}

func TestGPUSlotsShareWeights(t *testing.T) {
	t.Parallel()
	// Eight hosts on a 24 GiB card: eight 4.3 GB models would not fit, one model and
	// seven 0.6 GB borrowers do.
	p := gpu.Profile{Name: "shared", MaxSlots: 8, ReservePct: 5, LongTextThresholdSec: 15, LongLaneLimit: 8,
		MaxGenSeconds: 30, SegmentTokens: 120, FP16: true, ShareWeights: true}
	cal := gpu.Calibration{ResidentBytes: tts.SimResidentBytes, BorrowerBytes: ttshost.SimBorrowerBytes}
	var crashLender atomic.Bool
	b := setupSimSlots(t, simSlotsOpts{profile: &p, cal: cal, configure: func(o gpu.LaunchOpts, c *tts.SimulatorConfig) {
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
	require.Equal(t, 15, b.slots.Capacity())
	roles := func() map[gpu.WeightsRole]int {
		out := map[gpu.WeightsRole]int{}
		for _, h := range b.slots.Live(time.Minute).GPUs[0].Pool {
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
				sl, err := b.slots.Acquire(ctx, workflow.PermitRequest{LineID: int64(i + 1), AudioSeconds: float64(4 + 3*i), TextRunes: 40})
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
	res, err := b.slots.Calibrate(ctx, 9, simGPU, p, nil)
	require.NoError(t, err)
	require.Equal(t, int64(ttshost.SimBorrowerBytes), res.BorrowerBytes)
	require.Equal(t, int64(ttshost.SimBorrowerBytes), res.Calibration.BorrowerBytes)
	require.True(t, res.RecommendedProfile.ShareWeights)
	require.Greater(t, res.Recommended, 4, "more hosts than four whole models: %+v", res.Verdict)
	require.Zero(t, b.dev.OOMs())
}

func TestGPUSlotsRefuseSharedWeightsTheEngineCannotDo(t *testing.T) {
	t.Parallel()
	b := setupSimSlots(t, simSlotsOpts{ownWeights: true})
	b.serving(t, 2)
	require.Equal(t, 3, b.slots.Capacity(), "three 5 GiB models fit beside a 30 s line")
	p := gpu.DefaultProfile()
	p.ShareWeights = true
	err := b.slots.Apply(simGPU, workflow.GPUSetting{Profile: p, ProfileID: 3})
	require.ErrorIs(t, err, gpu.ErrInvalid)
	g := b.slots.Live(time.Minute).GPUs[0]
	require.NotNil(t, g.ProfileProblem)
	require.Equal(t, "gpu.profile.share_unsupported", g.ProfileProblem.Key)
	require.False(t, g.Snapshot.Profile.ShareWeights, "the GPU kept its profile")
}

// gpuWorkerBundle renders a project on a worker whose GPU slots run real model-host
// processes (workflow/testdata/slow_host.py) on a simulated card.
type gpuWorkerBundle struct {
	*testBundle
	slots  *workflow.GPUSlots
	busy   string
	killed atomic.Int64
}

func setupGPUWorker(t *testing.T, lines int) *gpuWorkerBundle {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	b := setup(t, lines)
	ctx := context.Background()
	blobs := studio.BlobStore{Dir: b.dataDir + "/blobs"}
	chars, err := b.store.Characters(ctx, b.project.ID)
	require.NoError(t, err)
	for i, c := range chars {
		ref := filepath.Join(t.TempDir(), fmt.Sprintf("ref-%d.wav", i))
		samples := make([]int16, 16000)
		for j := range samples {
			samples[j] = int16((j * (i + 3)) % 3000)
		}
		require.NoError(t, tts.WriteWAV(ref, 16000, samples))
		blob, err := b.store.PutBlob(ctx, blobs, ref, studio.Blob{Format: "wav", DurationMs: 1000, SampleRate: 16000, Channels: 1})
		require.NoError(t, err)
		require.NoError(t, b.store.SetCharacterReference(ctx, b.project.ID, c.ID, blob.SHA256, "ref.wav"))
	}
	hosts, err := filepath.Abs("../tts/hosts")
	require.NoError(t, err)
	script, err := filepath.Abs("testdata/slow_host.py")
	require.NoError(t, err)
	busy := t.TempDir()
	dev := simdev.New(24 * gpu.GiB)
	mon := gpu.NewMonitor(ctx, gpu.MonitorConfig{Driver: gpu.NewSimDriver(gpu.SimDevice{UUID: simGPU, Name: "Simulated", Device: dev})})
	launcher := ttshost.NewLauncher(ttshost.LauncherConfig{
		Name:    "bench",
		Command: func(gpu.LaunchOpts) ([]string, error) { return []string{python, script}, nil },
		Env: []string{"DUBSTUDIO_HOSTS_DIR=" + hosts, "SLOW_HOST_DIR=" + busy, "SLOW_HOST_SECONDS=0.4",
			"PYTHONDONTWRITEBYTECODE=1"},
		ReadyInterval: 20 * time.Millisecond,
		Stderr:        func(gpu.LaunchOpts) io.Writer { return io.Discard },
	})
	slots, err := workflow.NewGPUSlots(workflow.GPUSlotsConfig{Engine: "bench", Monitor: mon, Launcher: launcher,
		Pool: gpu.PoolConfig{HealthInterval: 100 * time.Millisecond, RestartBackoff: 20 * time.Millisecond}})
	require.NoError(t, err)
	slots.Start(ctx)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = slots.Stop(sctx)
	})
	w, err := workflow.NewWorker(b.pipeline, slots, workflow.WorkerConfig{Name: fmt.Sprintf("gpu-%d", time.Now().UnixNano()),
		DataDir: b.dataDir, FetchPollInterval: 100 * time.Millisecond, JobTimeout: 30 * time.Second,
		RescueAfter: 40 * time.Second, Heartbeat: 300 * time.Millisecond, DeadAfter: 5 * time.Second,
		RetryBase: 200 * time.Millisecond, RetryMax: time.Second}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		w.Stop(sctx)
	})
	return &gpuWorkerBundle{testBundle: b, slots: slots, busy: busy}
}

// killMidLine SIGKILLs the first host caught in the middle of a synthesis.
func (g *gpuWorkerBundle) killMidLine(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir(g.busy)
		for _, e := range entries {
			pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "busy-"))
			if err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
				g.killed.Add(1)
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no host was ever caught synthesizing")
}

// A render whose model host is SIGKILLed in the middle of a line still ends with
// every line done: the line fails its attempt as a dead host's, the pool starts a
// new host, and the retry renders it.
func TestGPUWorkerSurvivesAHostKilledMidLine(t *testing.T) {
	t.Parallel()
	g := setupGPUWorker(t, 4)
	ctx := context.Background()
	n, err := g.pipeline.RenderPending(ctx, g.project.ID)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	g.killMidLine(t)
	counts := g.waitSettled(t, 2*time.Minute)
	require.Equal(t, 4, counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)
	require.EqualValues(t, 1, g.killed.Load())

	retried := 0
	for _, l := range g.lines(t) {
		takes, err := g.store.Takes(ctx, g.project.ID, l.ID)
		require.NoError(t, err)
		require.Len(t, takes, 1)
		require.Equal(t, simGPU, takes[0].GPU, "the take names its GPU")
		require.Equal(t, "bench", takes[0].Engine)
		if l.Attempts > 1 {
			retried++
		}
	}
	require.Equal(t, 1, retried, "the killed line was tried again")
	m := metricsOf(g.slots)
	require.GreaterOrEqual(t, m.HostDeaths, uint64(1))
	restarts := 0
	for _, h := range g.slots.Live(time.Minute).GPUs[0].Pool {
		restarts += h.Restarts
	}
	require.Equal(t, 1, restarts, "the pool restarted the killed host")
}

// The agent applies an admin's profile live, publishes the GPUs, stores history and
// runs a requested calibration on the GPU it owns.
func TestGPUAgent(t *testing.T) {
	t.Parallel()
	store := studiotest.Store(t)
	admin := studiotest.User(t, store, studio.RoleAdmin)
	ctx := context.Background()
	b := setupSimSlots(t, simSlotsOpts{})
	b.serving(t, 2)
	require.NoError(t, store.RegisterWorker(ctx, studio.WorkerInfo{Name: "w-gpu", Host: "box", PID: 1, Engines: []string{"simulator"}}))
	agent := workflow.NewGPUAgent(store, b.slots, workflow.GPUAgentConfig{Worker: "w-gpu", Host: "box"})

	sp := &studio.GPUProfile{Name: "three", MaxSlots: 3, ReservePct: 10, LongTextThresholdSec: 3, LongLaneLimit: 1,
		MaxGenSeconds: 6, SegmentTokens: 120, FP16: true}
	require.NoError(t, store.SaveGPUProfile(ctx, admin.ID, sp))
	require.NoError(t, store.AssignGPUProfile(ctx, admin.ID, simGPU, sp.ID))
	require.NoError(t, agent.ApplySettings(ctx))
	snap := b.serving(t, 3)
	require.Equal(t, "three", snap.Profile.Name)

	agent.Publish(ctx)
	live, err := store.GPULiveStates(ctx)
	require.NoError(t, err)
	require.Len(t, live, 1)
	var st gpu.LiveState
	require.NoError(t, json.Unmarshal(live[0].State, &st))
	require.Equal(t, "w-gpu", st.Worker)
	require.Len(t, st.GPUs, 1)
	require.Equal(t, simGPU, st.GPUs[0].UUID)
	require.Equal(t, sp.ID, st.GPUs[0].ProfileID)
	require.Len(t, st.GPUs[0].Pool, 3)

	agent.SaveHistory(ctx, time.Now().Add(time.Minute))
	hist, err := store.GPUHistory(ctx, simGPU, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.NotEmpty(t, hist)
	require.Equal(t, "box", hist[0].Host)

	c, err := store.RequestGPUCalibration(ctx, admin.ID, simGPU, "Simulated", *sp)
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); agent.Run(runCtx) }()
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := store.GPUCalibrationByID(ctx, c.ID)
		require.NoError(t, err)
		if !got.Active() {
			require.Equal(t, studio.CalibrationDone, got.Status, got.Error)
			var res calibrate.Result
			require.NoError(t, json.Unmarshal(got.Result, &res))
			require.Positive(t, res.Recommended)
			require.Equal(t, "three", res.Profile.Name)
			break
		}
		require.True(t, time.Now().Before(deadline), "calibration never finished: %s", got.Progress)
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	<-done
	b.serving(t, 3)
}

// TestGPUSlotsOnARealGPU runs the GPU slots on the first NVIDIA GPU with
// random-weight IndexTTS-2-shaped hosts (tts/hosts/bench_host.py): mixed lengths
// from three goroutines on three hosts, the card's used memory (NVML, sampled every
// 200 ms) never above the budget. It runs only with DUBSTUDIO_GPU_TEST=1, from the
// repository root (DUBSTUDIO_HOSTS_DIR, default tts/hosts) on a machine with a GPU
// and python3 with torch; OUT, when set, receives a JSON summary.
func TestGPUSlotsOnARealGPU(t *testing.T) {
	if os.Getenv("DUBSTUDIO_GPU_TEST") != "1" {
		t.Skip("set DUBSTUDIO_GPU_TEST=1 on a machine with an NVIDIA GPU")
	}
	ctx := context.Background()
	mon := gpu.NewMonitor(ctx, gpu.MonitorConfig{Interval: 200 * time.Millisecond})
	if !mon.Available() {
		t.Skipf("no GPU: %v", mon.Err())
	}
	hosts := os.Getenv("DUBSTUDIO_HOSTS_DIR")
	if hosts == "" {
		hosts = "tts/hosts"
	}
	dev := mon.Devices()[0]
	launcher := ttshost.NewLauncher(ttshost.LauncherConfig{Name: "bench",
		Command: func(gpu.LaunchOpts) ([]string, error) {
			return []string{"python3", filepath.Join(hosts, "bench_host.py"), "--gpt-dtype", "fp16"}, nil
		},
		ProcessBytes: func(uuid string, pid int) (int64, bool) { return mon.ProcessBytes(uuid, pid) },
	})
	slots, err := workflow.NewGPUSlots(workflow.GPUSlotsConfig{Engine: "bench", Monitor: mon, GPUs: []gpu.Device{dev},
		Launcher: launcher})
	require.NoError(t, err)
	p := gpu.Profile{Name: "h200-test", MaxSlots: 3, ReservePct: 15, LongTextThresholdSec: 8, LongLaneLimit: 1,
		MaxGenSeconds: 10, SegmentTokens: 120, FP16: true}
	require.NoError(t, slots.Apply(dev.UUID, workflow.GPUSetting{Profile: p}))
	samples, stop := mon.Subscribe()
	slots.Start(ctx)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = slots.Stop(sctx)
	}()
	var maxUsed atomic.Int64
	go func() {
		for round := range samples {
			for _, s := range round {
				if s.UUID == dev.UUID && s.UsedBytes > maxUsed.Load() {
					maxUsed.Store(s.UsedBytes)
				}
			}
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	info, err := slots.Model(wctx)
	require.NoError(t, err)
	ref := filepath.Join(t.TempDir(), "ref.wav")
	samplesRef := make([]int16, 8*16000)
	for i := range samplesRef {
		samplesRef[i] = int16((i * 37) % 4000)
	}
	require.NoError(t, tts.WriteWAV(ref, 16000, samplesRef))

	type line struct {
		Seconds, Synth float64
		PeakAllocated  int64
	}
	var mu sync.Mutex
	var done []line
	var wg sync.WaitGroup
	start := time.Now()
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, secs := range []float64{2, 5, 10} {
				s, err := slots.Acquire(wctx, workflow.PermitRequest{LineID: int64(g*10 + int(secs)), AudioSeconds: secs, TextRunes: 40})
				if !assert(t, err) {
					return
				}
				t0 := time.Now()
				res, err := s.Engine().Synthesize(wctx, tts.Request{Text: "A benchmark line for the GPU test.", TargetSeconds: secs,
					Speaker: tts.Speaker{ReferenceAudioPath: ref}, OutputPath: filepath.Join(t.TempDir(), "o.wav")})
				s.Done(workflow.Outcome{PeakBytes: res.PeakReservedBytes, OOM: errors.Is(err, tts.ErrOutOfMemory), Failed: err != nil})
				if !assert(t, err) {
					return
				}
				mu.Lock()
				done = append(done, line{Seconds: res.AudioSeconds, Synth: time.Since(t0).Seconds(), PeakAllocated: res.PeakAllocatedBytes})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stop()
	m := slots.Executor().Metrics().GPUs[0]
	snap := slots.Executor().Snapshot()[0]
	summary := map[string]any{"gpu": dev, "model": info, "lines": done, "wall_seconds": time.Since(start).Seconds(),
		"max_used_bytes": maxUsed.Load(), "budget_bytes": p.Budget(dev.TotalBytes, 0), "metrics": m, "snapshot": snap}
	if out := os.Getenv("OUT"); out != "" {
		data, _ := json.MarshalIndent(summary, "", "  ")
		_ = os.WriteFile(filepath.Join(out, "gpu_slots.json"), data, 0o644)
	}
	t.Logf("%d lines in %.1f s; card used at most %.2f GB of a %.2f GB budget; safety factor %.2f; hosts %d",
		len(done), time.Since(start).Seconds(), float64(maxUsed.Load())/1e9, float64(p.Budget(dev.TotalBytes, 0))/1e9,
		m.SafetyFactor, len(snap.Hosts))
	require.Len(t, done, 9)
	require.Zero(t, m.OOMs)
	require.LessOrEqual(t, maxUsed.Load(), p.Budget(dev.TotalBytes, 0))
}

func assert(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}
