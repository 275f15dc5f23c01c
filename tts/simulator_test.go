package tts

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"dubstudio/internal/simdev"

	"github.com/stretchr/testify/require"
)

type simBundle struct {
	dev *simdev.Device
	sim *Simulator
	dir string
	ref string
}

func setupSim(t *testing.T, total int64, mutate func(*SimulatorConfig)) *simBundle {
	t.Helper()
	b := &simBundle{dev: simdev.New(total), dir: t.TempDir()}
	cfg := SimulatorConfig{Device: b.dev, Tone: true}
	if mutate != nil {
		mutate(&cfg)
	}
	sim, err := NewSimulator(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	b.sim = sim
	b.ref = filepath.Join(b.dir, "ref.wav")
	require.NoError(t, WriteWAV(b.ref, 16000, make([]int16, 1600)))
	return b
}

func (b *simBundle) out(name string) string { return filepath.Join(b.dir, "takes", name+".wav") }

func TestSimulatorSynthesize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSim(t, 80<<30, nil)
	text := "The quick brown fox jumps over the lazy dog"
	req := Request{Text: text, Speaker: Speaker{ReferenceAudioPath: b.ref}, OutputPath: b.out("a")}
	want := PredictNaturalSeconds(text, "en")
	require.InDelta(t, want, b.sim.AudioSecondsFor(req), 1e-12)

	res, err := b.sim.Synthesize(ctx, req)
	require.NoError(t, err)
	require.InDelta(t, want, res.AudioSeconds, 1.0/22050)
	require.Equal(t, int(math.Round(want*50)), res.Tokens)
	wi, err := ReadWAVInfo(res.OutputPath)
	require.NoError(t, err)
	require.Equal(t, 22050, wi.SampleRate)
	require.InDelta(t, res.AudioSeconds, wi.Seconds, 1e-9)

	peak := b.sim.PeakBytesFor(res.AudioSeconds)
	require.Equal(t, int64(SimPeakBaseBytes)+int64(SimPeakPerSecondBytes*res.AudioSeconds), peak)
	require.Equal(t, int64(SimResidentBytes)+peak, res.PeakAllocatedBytes)
	st := b.sim.Process().Stats()
	require.Zero(t, st.Allocated, "released after the request")
	require.Equal(t, peak, st.Reserved, "the cache pool keeps the peak")
	require.Equal(t, int64(SimResidentBytes)+peak, b.dev.Used())

	// The duration factor scales the audio.
	req.DurationFactor = 1.5
	req.OutputPath = b.out("b")
	slow, err := b.sim.Synthesize(ctx, req)
	require.NoError(t, err)
	require.InDelta(t, want*1.5, slow.AudioSeconds, 1.0/22050)
	require.Equal(t, 1.5, slow.DurationFactor)

	info, err := b.sim.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(SimResidentBytes), info.ResidentBytes)
	require.Equal(t, 1, info.Concurrency)
	require.Equal(t, int64(2), b.sim.Stats().Requests)
}

func TestSimulatorFollowTargetAndLatency(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var slept []time.Duration
	b := setupSim(t, 80<<30, func(c *SimulatorConfig) {
		c.FollowTarget = true
		c.TokensPerSecond = 100
		c.Sleep = func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			slept = append(slept, d)
			mu.Unlock()
			return ctx.Err()
		}
	})
	res, err := b.sim.Synthesize(context.Background(), Request{Text: "hi", TargetSeconds: 4, OutputPath: b.out("t")})
	require.NoError(t, err)
	require.InDelta(t, 4.0, res.AudioSeconds, 1e-9)
	require.Equal(t, 200, res.Tokens)
	require.Equal(t, []time.Duration{2 * time.Second}, slept, "200 tokens at 100 tokens/s")
	require.InDelta(t, 1.6, res.Stages["gpt"], 1e-9)
}

func TestSimulatorOutOfMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSim(t, SimResidentBytes+200_000_000, func(c *SimulatorConfig) { c.FollowTarget = true })
	_, err := b.sim.Synthesize(ctx, Request{Text: "x", TargetSeconds: 1, OutputPath: b.out("ok")})
	require.NoError(t, err, "83 MB fits in 200 MB")
	_, err = b.sim.Synthesize(ctx, Request{Text: "x", TargetSeconds: 10, OutputPath: b.out("big")})
	require.ErrorIs(t, err, ErrOutOfMemory, "425 MB does not")
	require.ErrorIs(t, err, simdev.ErrOutOfMemory)
	require.NoFileExists(t, b.out("big"))
	require.Equal(t, int64(1), b.dev.OOMs())
	require.Equal(t, int64(1), b.sim.Stats().OOMs)
	_, err = b.sim.Synthesize(ctx, Request{Text: "x", TargetSeconds: 2, OutputPath: b.out("after")})
	require.NoError(t, err, "the host keeps working after an OOM")

	// A model that does not fit cannot load.
	_, err = NewSimulator(SimulatorConfig{Device: simdev.New(1 << 30)})
	require.ErrorIs(t, err, ErrOutOfMemory)
}

func TestSimulatorConcurrentRequestsShareMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hold := make(chan struct{})
	started := make(chan struct{}, 1)
	b := setupSim(t, SimResidentBytes+500_000_000, func(c *SimulatorConfig) {
		c.FollowTarget = true
		c.Concurrency = 2
		c.TokensPerSecond = 1
		c.Sleep = func(ctx context.Context, d time.Duration) error {
			started <- struct{}{}
			<-hold
			return nil
		}
	})
	errc := make(chan error, 1)
	go func() {
		_, err := b.sim.Synthesize(ctx, Request{Text: "x", TargetSeconds: 8, OutputPath: b.out("first")}) // 349 MB
		errc <- err
	}()
	<-started
	info, err := b.sim.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, info.Busy)
	_, err = b.sim.Synthesize(ctx, Request{Text: "x", TargetSeconds: 8, OutputPath: b.out("second")})
	require.ErrorIs(t, err, ErrOutOfMemory, "two 349 MB peaks do not fit in 500 MB")
	close(hold)
	require.NoError(t, <-errc)
}

func TestSimulatorFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSim(t, 80<<30, func(c *SimulatorConfig) {
		c.FaultFunc = func(r Request) Fault {
			if strings.Contains(r.Text, "[invalid]") {
				return FaultInvalid
			}
			return FaultNone
		}
	})
	req := Request{Text: "hello", OutputPath: b.out("f")}

	b.sim.Inject(FaultOOM, FaultInvalid, FaultHang)
	_, err := b.sim.Synthesize(ctx, req)
	require.ErrorIs(t, err, ErrOutOfMemory)
	_, err = b.sim.Synthesize(ctx, req)
	require.ErrorIs(t, err, ErrInvalidInput)
	hctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = b.sim.Synthesize(hctx, req)
	require.ErrorIs(t, err, context.Canceled)

	_, err = b.sim.Synthesize(ctx, Request{Text: "say [invalid]", OutputPath: b.out("g")})
	require.ErrorIs(t, err, ErrInvalidInput)

	b.sim.Inject(FaultCrash)
	_, err = b.sim.Synthesize(ctx, req)
	require.ErrorIs(t, err, ErrUnavailable)
	require.Zero(t, b.dev.Used(), "a crashed host frees its memory")
	_, err = b.sim.Synthesize(ctx, req)
	require.ErrorIs(t, err, ErrUnavailable)
	_, err = b.sim.Info(ctx)
	require.ErrorIs(t, err, ErrUnavailable)
	_, err = b.sim.PrepareSpeaker(ctx, PrepareRequest{ReferenceAudioPath: b.ref})
	require.ErrorIs(t, err, ErrUnavailable)

	require.NoError(t, b.sim.Restart())
	_, err = b.sim.Synthesize(ctx, req)
	require.NoError(t, err)
	require.Equal(t, int64(SimResidentBytes)+b.sim.Process().Stats().Reserved, b.dev.Used())
}

// TestSimulatorConditioningComputedOnce: preparing the same reference audio for the same
// model version computes once; a second simulator (a restarted host) loads the file;
// synthesis with the conditioning path computes nothing; another version recomputes.
func TestSimulatorConditioningComputedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSim(t, 80<<30, nil)
	cache := filepath.Join(b.dir, "cond")
	req := PrepareRequest{ReferenceAudioPath: b.ref, CacheDir: cache}

	r1, err := b.sim.PrepareSpeaker(ctx, req)
	require.NoError(t, err)
	require.True(t, r1.Computed)
	require.FileExists(t, r1.CachePath)
	r2, err := b.sim.PrepareSpeaker(ctx, req)
	require.NoError(t, err)
	require.False(t, r2.Computed)
	require.Equal(t, SimulatorStats{ConditioningComputed: 1, ConditioningLoaded: 1}, b.sim.Stats())

	other, err := NewSimulator(SimulatorConfig{Device: b.dev})
	require.NoError(t, err)
	defer other.Close()
	r3, err := other.PrepareSpeaker(ctx, req)
	require.NoError(t, err)
	require.False(t, r3.Computed)
	_, err = other.Synthesize(ctx, Request{Text: "Hello.", Speaker: Speaker{ReferenceAudioPath: b.ref, ConditioningPath: r3.CachePath},
		OutputPath: b.out("c")})
	require.NoError(t, err)
	require.Zero(t, other.Stats().ConditioningComputed)

	// Without a cache file, a speaker change computes, a repeat does not.
	fresh, err := NewSimulator(SimulatorConfig{Device: b.dev, Version: "simulator-2"})
	require.NoError(t, err)
	defer fresh.Close()
	for i := range 2 {
		_, err = fresh.Synthesize(ctx, Request{Text: "Hello.", Speaker: Speaker{ReferenceAudioPath: b.ref}, OutputPath: b.out("d" + string(rune('0'+i)))})
		require.NoError(t, err)
	}
	require.Equal(t, int64(1), fresh.Stats().ConditioningComputed)
	r4, err := fresh.PrepareSpeaker(ctx, req)
	require.NoError(t, err)
	require.True(t, r4.Computed, "another model version is another cache key")
	require.NotEqual(t, r1.CachePath, r4.CachePath)

	_, err = b.sim.PrepareSpeaker(ctx, PrepareRequest{ReferenceAudioPath: b.ref, ReferenceSHA256: strings.Repeat("0", 64)})
	require.ErrorIs(t, err, ErrInvalidInput)
	_, err = b.sim.PrepareSpeaker(ctx, PrepareRequest{ReferenceAudioPath: filepath.Join(b.dir, "missing.wav")})
	require.ErrorIs(t, err, ErrInvalidInput)
}

// A batching simulator decodes with the hosts' default beams unless told, and says
// so as a protocol-2 host does.
func TestSimulatorBatchBeams(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		beams, want int
		decode      string
	}{
		{0, DefaultBeams, DecodeBeamSearch},
		{1, 1, DecodeSample},
		{5, 5, DecodeBeamSearch},
	} {
		sim, err := NewSimulator(SimulatorConfig{Device: simdev.New(100 << 30), Batch: &SimBatch{Beams: c.beams}})
		require.NoError(t, err)
		b := sim.BatchInfo()
		require.Equal(t, c.want, b.Beams, "asked for %d", c.beams)
		require.Equal(t, c.decode, b.Decode, "asked for %d", c.beams)
	}
}
