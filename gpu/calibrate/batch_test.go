package calibrate_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/gpu"
	"dubstudio/gpu/calibrate"
	"dubstudio/gpu/ttshost"
	"dubstudio/internal/simdev"
	"dubstudio/tts"
)

// batchSetup calibrates a batching simulator on a simulated 24 GiB card: a 4.3 GB
// model and a KV pool (4 GB unless the profile sets one), each line's KV (its
// tokens and the 32 prefix tokens, times 122,880 bytes a token, times 3 beams) and
// 12 MB of activations per audio second. The host decodes in real time at 500
// tokens a second alone (a 1 s line takes 0.1 s, a 4 s line 0.4 s: long enough that
// a loaded test machine's overhead does not blur the model), in steps slowed by the
// batch then (batch). Lines are of 1 and 4 s, written at 8 kHz to keep the CPU's
// share of a line small.
func batchSetup(t *testing.T, p gpu.Profile, batch tts.SimBatch) calibrate.Config {
	t.Helper()
	dev := simdev.New(24 * gpu.GiB)
	sl := &ttshost.SimLauncher{
		Devices: map[string]*simdev.Device{"GPU-sim": dev},
		Config:  tts.SimulatorConfig{TokensPerSecond: 500, FollowTarget: true, Batch: &batch, SampleRate: 8000},
		Profile: func(string) gpu.Profile { return p },
	}
	t.Cleanup(func() { require.Empty(t, dev.Processes(), "the host is stopped at the end") })
	return calibrate.Config{
		GPU: gpu.Device{UUID: "GPU-sim", Name: "Simulated", TotalBytes: dev.Total()}, Profile: p,
		Device: simDevice{dev}, WorkDir: t.TempDir(),
		Buckets: []gpu.CalibrationBucket{{Name: "short", Seconds: 1}, {Name: "longest", Seconds: 4}},
		Launch: func(ctx context.Context, i int) (ttshost.EngineHost, error) {
			return sl.LaunchHost(ctx, gpu.LaunchOpts{GPU: "GPU-sim", ID: fmt.Sprint(i)})
		},
	}
}

func batchProfile(maxSequences int) gpu.Profile {
	return gpu.Profile{Name: "batch", Batching: true, Concurrency: maxSequences, Beams: 3, ReservePct: 5,
		LongTextThresholdSec: 4, LongLaneLimit: 1, MaxGenSeconds: 4, SegmentTokens: 120, FP16: true}
}

// The simulated card is busy from 4 lines at once and each line is 25% slower per
// other line in the batch: 2, 4 and 8 lines give about 1.6, 2.3 and 1.45 times one
// line's audio per second, and a line at 8 takes 5.5 times as long as alone. The
// gain stops at 8, where latency is past 3 times: 4 is recommended.
func TestBatchingCalibrationRecommendsWhereTheGainStops(t *testing.T) {
	t.Parallel()
	cfg := batchSetup(t, batchProfile(64), tts.SimBatch{Slowdown: 0.25, Saturation: 4})
	res, err := calibrate.Run(context.Background(), cfg)
	require.NoError(t, err)
	b := res.Batch
	require.NotNil(t, b)

	// (1) Memory: the host holds its weights and pool; the calibration's resident
	// memory is the weights, to which BatchResident adds the profile's pool.
	require.EqualValues(t, tts.SimResidentBytes+tts.SimKVCacheBytes, b.HostResidentBytes)
	require.EqualValues(t, tts.SimResidentBytes+tts.SimKVCacheBytes, res.ResidentBytes)
	require.EqualValues(t, tts.SimKVCacheBytes, b.KVCacheBytes)
	require.EqualValues(t, tts.SimResidentBytes, res.Calibration.ResidentBytes)
	require.Equal(t, 3, b.Beams)
	require.Equal(t, 64, b.MaxSequences, "the host was started with the profile's maximum sequences")
	require.Equal(t, gpu.CounterSequence, res.PeakCounter)

	// (2) Bytes per sequence by length: the simulator's own formula, rising with the length.
	require.Len(t, res.Analysis, 2)
	var last int64
	for _, bk := range res.Analysis {
		require.True(t, bk.Trusted)
		tokens := int64(math.Round(bk.MaxAudioSeconds * b.TokensPerAudioSecond))
		require.Equal(t, (tokens+int64(b.PrefixTokens))*b.KVBytesPerToken*3, bk.KVBytes, bk.Bucket)
		segments := 1.0
		for _, bt := range res.Buckets {
			if bt.Name == bk.Bucket {
				segments = float64((len([]rune(bt.Text)) + 119) / 120)
			}
		}
		require.InDelta(t, float64(tts.SimActivationBytesPerSecond)*bk.MaxAudioSeconds/segments, bk.PeakBytes, 2, bk.Bucket)
		require.Greater(t, bk.KVBytes+bk.PeakBytes, last, "a longer line costs more")
		last = bk.KVBytes + bk.PeakBytes
	}
	require.True(t, res.Calibration.Calibrated(), "the activations make the curve lines are admitted by")

	// (3) The lines that fit: the KV pool over a mean line of the mix.
	require.Equal(t, gpu.BatchSequencesThatFit(b.KVCacheBytes, b.MixKVBytes, b.MixActivationBytes,
		res.Profile.Budget(res.GPU.TotalBytes, res.BaselineUsedBytes), res.ResidentBytes), b.SequencesThatFit)
	require.Equal(t, int(b.KVCacheBytes/b.MixKVBytes), b.SequencesThatFit, "the KV pool is the tighter bound")
	require.Equal(t, min(b.SequencesThatFit, 64), b.Limit, "the host's maximum sequences bound the test too")

	// (4) Steps double until the gain stops.
	v := res.Verdict
	var ns []int
	for _, s := range v.Steps {
		ns = append(ns, s.Concurrency)
		require.True(t, s.Healthy(), "%+v", s)
		require.GreaterOrEqual(t, s.Tasks, 4*s.Concurrency)
		require.Positive(t, s.LatencyPerAudioSecond)
		require.Greater(t, s.PeakVRAMBytes, b.HostResidentBytes)
	}
	require.Equal(t, []int{1, 2, 4, 8}, ns, "the test stops at the first step without gain")
	require.Greater(t, v.Steps[1].Throughput, v.Steps[0].Throughput*(1+gpu.MinThroughputGain))
	require.Greater(t, v.Steps[2].Throughput, v.Steps[1].Throughput*(1+gpu.MinThroughputGain))
	require.Less(t, v.Steps[3].Throughput, v.Steps[2].Throughput*(1+gpu.MinThroughputGain))
	require.Equal(t, 8, v.SlowdownAt)
	require.Equal(t, 8, v.LatencyAt, "a line at 8 takes more than 3 times as long per audio second")
	require.Zero(t, v.CrashAt)

	// (5) The recommendation: the maximum sequences where the gain stops.
	require.Equal(t, 4, res.Recommended)
	require.Equal(t, "slowdown", v.Why, "the latency point is named, not obeyed")
	require.Equal(t, 4, res.RecommendedProfile.Concurrency)
	require.True(t, res.RecommendedProfile.Batching)
	require.NoError(t, res.RecommendedProfile.Validate())
	require.Empty(t, res.Failures)
}

// A KV pool of 0.15 GiB holds three lines of the mix (1, 1 and 4 s: 48.7 MB of KV
// a line on average): the load test stops there,
// still gaining, and says so.
func TestBatchingCalibrationStopsWhereMemoryRunsOut(t *testing.T) {
	t.Parallel()
	p := batchProfile(64)
	p.KVCacheGiB = 0.15
	cfg := batchSetup(t, p, tts.SimBatch{})
	res, err := calibrate.Run(context.Background(), cfg)
	require.NoError(t, err)
	b := res.Batch
	require.Equal(t, p.KVCacheBytes(), b.KVCacheBytes)
	require.Equal(t, 3, b.SequencesThatFit)
	require.Equal(t, 3, b.Limit)
	var ns []int
	for _, s := range res.Verdict.Steps {
		ns = append(ns, s.Concurrency)
	}
	require.Equal(t, []int{1, 2, 3}, ns)
	require.Equal(t, "untested_limit", res.Verdict.Why)
	require.Equal(t, 3, res.Recommended)
	require.Equal(t, 3, res.ConcurrencyThatFits)
}

// A host that does not batch cannot be calibrated as one.
func TestBatchingCalibrationNeedsABatchingHost(t *testing.T) {
	t.Parallel()
	dev := simdev.New(24 * gpu.GiB)
	sl := &ttshost.SimLauncher{Devices: map[string]*simdev.Device{"GPU-sim": dev}, Config: tts.SimulatorConfig{FollowTarget: true}}
	_, err := calibrate.Run(context.Background(), calibrate.Config{GPU: gpu.Device{UUID: "GPU-sim", TotalBytes: dev.Total()},
		Profile: batchProfile(8), WorkDir: t.TempDir(),
		Launch: func(ctx context.Context, i int) (ttshost.EngineHost, error) {
			return sl.LaunchHost(ctx, gpu.LaunchOpts{GPU: "GPU-sim", ID: fmt.Sprint(i)})
		}})
	require.ErrorIs(t, err, gpu.ErrInvalid)
	require.ErrorContains(t, err, "does not batch")
	require.Empty(t, dev.Processes())
}

// A calibration cancelled during its load test keeps the steps it finished, analysed.
func TestBatchingCalibrationCancelledKeepsItsSteps(t *testing.T) {
	t.Parallel()
	cfg := batchSetup(t, batchProfile(64), tts.SimBatch{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.Progress = func(key string, args ...any) {
		if key == "gpu.calibration.progress.step" && args[0] == 4 {
			cancel()
		}
	}
	res, err := calibrate.Run(ctx, cfg)
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, res.Verdict.Steps, 2)
	require.Equal(t, 2, res.Recommended, "the best of the steps done")
	require.Equal(t, "untested_limit", res.Verdict.Why)
}
