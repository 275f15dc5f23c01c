package calibrate_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/gpu"
	"dubstudio/gpu/calibrate"
	"dubstudio/gpu/ttshost"
	"dubstudio/internal/simdev"
	"dubstudio/tts"
)

// vclock is a virtual clock the simulated hosts advance: a request "takes" its
// generation time on it, so that latencies and throughput are exact functions of the
// model below, not of the machine running the test.
type vclock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *vclock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *vclock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// simDevice adapts a simulated device to DeviceMemory (with exact peaks).
type simDevice struct{ *simdev.Device }

func (d simDevice) Used() (int64, bool) { return d.Device.Used(), true }

type testBundle struct {
	dev      *simdev.Device
	clock    *vclock
	launches atomic.Int64
	cfg      calibrate.Config
}

// setup calibrates a simulated 24 GiB card whose hosts hold 4.3 GB each, so the
// sixth host cannot load. parallel says how the card shares time: true, n requests
// run n times as fast together (perfect scaling); false, the card does one
// request's worth of work at a time whatever the concurrency (no gain).
func setup(t *testing.T, parallel bool) *testBundle {
	t.Helper()
	b := &testBundle{dev: simdev.New(24 * gpu.GiB), clock: &vclock{t: time.Unix(1_800_000_000, 0)}}
	sl := &ttshost.SimLauncher{
		Devices: map[string]*simdev.Device{"GPU-sim": b.dev},
		Config: tts.SimulatorConfig{TokensPerSecond: 100, FollowTarget: true,
			Sleep: func(_ context.Context, d time.Duration) error {
				if parallel {
					d /= time.Duration(max(len(b.dev.Processes()), 1))
				}
				b.clock.Add(d)
				return nil
			}},
	}
	p := gpu.Profile{Name: "sim", Concurrency: 2, ReservePct: 5, LongTextThresholdSec: 12, LongLaneLimit: 1,
		MaxGenSeconds: 20, SegmentTokens: 120, FP16: true}
	b.cfg = calibrate.Config{
		GPU:     gpu.Device{UUID: "GPU-sim", Name: "Simulated", TotalBytes: b.dev.Total()},
		Profile: p,
		Device:  simDevice{b.dev},
		Launch: func(ctx context.Context, i int) (ttshost.EngineHost, error) {
			b.launches.Add(1)
			return sl.LaunchHost(ctx, gpu.LaunchOpts{GPU: "GPU-sim", ID: fmt.Sprint(i)})
		},
		MaxConcurrency: 6,
		WorkDir:        t.TempDir(),
		Now:            b.clock.Now,
	}
	return b
}

func TestCalibrationFindsTheCrashPoint(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	var progress []string
	b.cfg.Progress = func(key string, _ ...any) { progress = append(progress, key) }
	res, err := calibrate.Run(context.Background(), b.cfg)
	require.NoError(t, err)

	// (1) Memory after load: the simulated model.
	require.EqualValues(t, tts.SimResidentBytes, res.LoadedAllocatedBytes)
	require.EqualValues(t, tts.SimResidentBytes, res.LoadedBytes)
	require.EqualValues(t, tts.SimResidentBytes, res.ResidentBytes, "the warm-up's cache was released")
	require.Equal(t, gpu.CounterNVML, res.MemoryCounter)
	require.Equal(t, gpu.CounterTorchPeak, res.PeakCounter)
	require.Equal(t, "simulator", res.Engine)

	// (2) Peaks per bucket, three runs each, the worst kept: the simulator's formula.
	require.Len(t, res.Analysis, 4)
	require.Len(t, res.Runs, 12)
	for _, bk := range res.Analysis {
		require.Equal(t, 3, bk.Runs)
		require.True(t, bk.Trusted)
		secs := bk.MaxAudioSeconds
		segments := 1.0
		for _, bt := range res.Buckets {
			if bt.Name == bk.Bucket {
				segments = float64((len([]rune(bt.Text)) + 119) / 120)
			}
		}
		want := tts.SimPeakBaseBytes + int64(tts.SimPeakPerSecondBytes*secs/segments)
		require.InDelta(t, want, bk.PeakBytes, 2, bk.Bucket)
	}
	require.Equal(t, []string{"short", "medium", "long", "longest"}, []string{res.Analysis[0].Bucket,
		res.Analysis[1].Bucket, res.Analysis[2].Bucket, res.Analysis[3].Bucket})
	require.InDelta(t, 20, res.Analysis[3].MaxAudioSeconds, 0.01)
	require.True(t, res.Calibration.Calibrated())
	require.Empty(t, res.Leaks, "(3) memory after each run falls back")

	// (4) The load test: 1, 2, 3, 4 healthy; the sixth host cannot load.
	steps := res.Verdict.Steps
	require.Len(t, steps, 5)
	for i, n := range []int{1, 2, 3, 4} {
		require.Equal(t, n, steps[i].Concurrency)
		require.True(t, steps[i].Healthy(), "%+v", steps[i])
		require.Equal(t, 8, steps[i].Tasks)
		require.Positive(t, steps[i].AvgLatency)
		require.GreaterOrEqual(t, steps[i].P95Latency, steps[i].AvgLatency)
		require.Greater(t, steps[i].PeakVRAMBytes, int64(n)*tts.SimResidentBytes)
		require.LessOrEqual(t, steps[i].PeakVRAMBytes, b.dev.Total())
	}
	require.InDelta(t, 4*steps[0].Throughput, steps[3].Throughput, 1e-6*steps[0].Throughput, "perfect scaling")
	require.Equal(t, 6, steps[4].Concurrency)
	require.Equal(t, 1, steps[4].OOMs)
	require.Equal(t, 6, res.Verdict.CrashAt)
	require.Zero(t, res.Verdict.SlowdownAt)
	require.Equal(t, 4, res.Recommended, "one step below the crash")
	require.Equal(t, 4, res.RecommendedProfile.Concurrency)
	require.Equal(t, 1, res.RecommendedProfile.LongLaneLimit)
	require.Len(t, res.Failures, 1)
	require.Equal(t, "oom", res.Failures[0].Kind)
	require.Contains(t, progress, "gpu.calibration.progress.step")

	// Every host is stopped at the end.
	require.Empty(t, b.dev.Processes())
}

func TestCalibrationFindsTheSlowdownPoint(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	res, err := calibrate.Run(context.Background(), b.cfg)
	require.NoError(t, err)
	v := res.Verdict
	require.Equal(t, 2, v.SlowdownAt, "a second synthesis at once adds no throughput")
	require.Zero(t, v.CrashAt, "the load test stops when two steps add no throughput")
	require.Len(t, v.Steps, 3)
	require.Equal(t, 1, res.Recommended)
	require.Equal(t, "slowdown", v.Why)
}

func TestCalibrationCountsKilledHosts(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	launch := b.cfg.Launch
	var crashed atomic.Bool
	b.cfg.Launch = func(ctx context.Context, i int) (ttshost.EngineHost, error) {
		h, err := launch(ctx, i)
		if err == nil && i == 1 && crashed.CompareAndSwap(false, true) {
			// The second host is killed by the OS in its second timed request, after
			// its warm-up (one line per bucket) and a first line.
			faults := make([]tts.Fault, len(calibrate.DefaultBuckets(b.cfg.Profile))+2)
			faults[len(faults)-1] = tts.FaultCrash
			h.(*ttshost.SimHost).Simulator().Inject(faults...)
		}
		return h, err
	}
	res, err := calibrate.Run(context.Background(), b.cfg)
	require.NoError(t, err)
	steps := res.Verdict.Steps
	require.Len(t, steps, 2, "the test stops at the crash")
	require.Equal(t, 1, steps[1].Killed)
	require.Equal(t, steps[1].Tasks-1, steps[1].Successes, "the killed host was replaced for the rest: %+v %+v", steps, res.Failures)
	require.Equal(t, 2, res.Verdict.CrashAt)
	require.Equal(t, 1, res.Recommended)
	require.EqualValues(t, 3, b.launches.Load(), "two hosts and one replacement")
	require.Equal(t, "killed", res.Failures[0].Kind)
	require.Empty(t, b.dev.Processes())
}

func TestCalibrationRefusesAProfileThatCannotFit(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	b.cfg.Profile.ReservePct = 90
	res, err := calibrate.Run(context.Background(), b.cfg)
	require.NoError(t, err)
	require.NotNil(t, res.DoesNotFit)
	require.Equal(t, "gpu.profile.does_not_fit", res.DoesNotFit.Key)
	require.Zero(t, res.Recommended)
	require.Empty(t, res.Verdict.Steps)
}

func TestTextOfMatchesItsLength(t *testing.T) {
	t.Parallel()
	for _, s := range []float64{2, 6, 12, 30} {
		text := calibrate.TextOf(s)
		got := tts.PredictNaturalSeconds(text, "en")
		require.GreaterOrEqual(t, got, s)
		require.Less(t, got, s+1.5, text)
	}
	bs := calibrate.DefaultBuckets(gpu.Profile{MaxGenSeconds: 10})
	require.Len(t, bs, 3)
	require.Equal(t, "longest", bs[2].Name)
	require.InDelta(t, 10, bs[2].Seconds, 0)
}
