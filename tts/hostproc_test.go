package tts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// standInBundle runs hosts/indextts_host.py against the stand-in IndexTTS in
// hosts/testdata/standin (no torch, no GPU).
type standInBundle struct {
	python   string
	dir      string
	modelDir string
	log      string
	ref      string
	refSHA   string
	hosts    int
}

func setupStandIn(t *testing.T) *standInBundle {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python model host cannot be tested here")
	}
	dir := t.TempDir()
	// A stand-in model directory in the real formats: the host checks it before loading.
	models, err := filepath.Abs(filepath.Join("hosts", "testdata", "standin-model", "2"))
	require.NoError(t, err)
	b := &standInBundle{python: python, dir: dir, modelDir: models, log: filepath.Join(dir, "standin.log")}
	b.ref = filepath.Join(dir, "ref.wav")
	samples := make([]int16, 16000)
	for i := range samples {
		samples[i] = int16(4000 * math.Sin(float64(i)/10))
	}
	require.NoError(t, WriteWAV(b.ref, 16000, samples))
	data, err := os.ReadFile(b.ref)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	b.refSHA = hex.EncodeToString(sum[:])
	return b
}

// syncBuffer collects a host's log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start starts a host and waits until it is healthy; it is stopped at cleanup.
func (b *standInBundle) start(t *testing.T, extra ...string) *HostProcess {
	t.Helper()
	standin, err := filepath.Abs(filepath.Join("hosts", "testdata", "standin"))
	require.NoError(t, err)
	logs := &syncBuffer{}
	b.hosts++
	sock := filepath.Join(b.dir, fmt.Sprintf("host%d.sock", b.hosts))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := StartHost(ctx, HostProcessConfig{
		Name: "indextts",
		Command: append([]string{b.python, filepath.Join("hosts", "indextts_host.py"),
			"--model-dir", b.modelDir, "--model-version", "go-test-v1"}, extra...),
		Env:    []string{"PYTHONPATH=" + standin, "INDEXTTS_STANDIN_LOG=" + b.log, "PYTHONDONTWRITEBYTECODE=1"},
		Socket: sock,
		Stderr: logs,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = p.Stop(ctx)
		if t.Failed() {
			t.Logf("host log:\n%s", logs.String())
		}
	})
	_, err = p.Client().WaitHealthy(ctx, 20*time.Millisecond)
	require.NoError(t, err, logs.String())
	return p
}

// computations counts the stand-in's speaker conditioning computations.
func (b *standInBundle) computations(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile(b.log)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	n := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(line, "spk ") {
			n++
		}
	}
	return n
}

func TestPythonHostThroughHostClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupStandIn(t)
	p := b.start(t)
	var eng Engine = p.Client()

	info, err := eng.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, "IndexTTS-2", info.Model)
	require.Equal(t, "go-test-v1", info.Version)
	require.Equal(t, 1, info.Concurrency)
	require.Equal(t, int64(4_300_000_000), info.ResidentBytes)
	require.False(t, info.DurationControl)

	cacheDir := filepath.Join(b.dir, "cond")
	prep, err := eng.PrepareSpeaker(ctx, PrepareRequest{ReferenceAudioPath: b.ref, ReferenceSHA256: b.refSHA, CacheDir: cacheDir})
	require.NoError(t, err)
	require.True(t, prep.Computed)
	require.FileExists(t, prep.CachePath)

	out := filepath.Join(b.dir, "takes", "line-1.wav")
	res, err := eng.Synthesize(ctx, Request{
		Text:    "We leave at dawn, and nobody looks back.",
		Speaker: Speaker{ReferenceAudioPath: b.ref, ConditioningPath: prep.CachePath},
		Emotion: Emotion{Mode: EmotionVector, Vector: [8]float64{0.9, 0, 0, 0, 0, 0, 0, 0.9}},
		Seed:    3, OutputPath: out,
	})
	require.NoError(t, err)
	wi, err := ReadWAVInfo(out)
	require.NoError(t, err)
	require.Equal(t, 22050, wi.SampleRate)
	require.InDelta(t, wi.Seconds, res.AudioSeconds, 1e-6)
	require.Equal(t, 22050, res.SampleRate)
	require.Equal(t, "indextts", res.Engine)
	require.Equal(t, "go-test-v1", res.ModelVersion)
	require.Equal(t, int(math.Round(res.AudioSeconds*50)), res.Tokens)
	require.Greater(t, res.PeakAllocatedBytes, info.ResidentBytes)
	require.Contains(t, res.Stages, "gpt")
	require.Equal(t, 1, b.computations(t))

	_, err = eng.Synthesize(ctx, Request{Text: "Too long for this card [oom]", Speaker: Speaker{ReferenceAudioPath: b.ref}, OutputPath: out})
	require.ErrorIs(t, err, ErrOutOfMemory)
	_, err = eng.Synthesize(ctx, Request{Text: "Hello.", Speaker: Speaker{ReferenceAudioPath: filepath.Join(b.dir, "missing.wav")}, OutputPath: out})
	require.ErrorIs(t, err, ErrInvalidInput)
	_, err = eng.Synthesize(ctx, Request{Text: "[boom]", Speaker: Speaker{ReferenceAudioPath: b.ref}, OutputPath: out})
	require.ErrorIs(t, err, ErrInternal)

	rc, err := p.Client().ReleaseCache(ctx)
	require.NoError(t, err)
	require.Equal(t, rc.Allocated, rc.ReservedAfter)

	h, err := p.Client().Health(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), h.Counters["ooms"])

	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, p.Stop(stopCtx))
	_, err = eng.Info(ctx)
	require.ErrorIs(t, err, ErrUnavailable)
}

// TestConditioningComputedOnce prepares the same reference audio for the same model
// version twice in one host and once more in a restarted host: the conditioning is
// computed once and loaded from its cache file after that.
func TestConditioningComputedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupStandIn(t)
	cacheDir := filepath.Join(b.dir, "cond")
	req := PrepareRequest{ReferenceAudioPath: b.ref, ReferenceSHA256: b.refSHA, CacheDir: cacheDir}

	first := b.start(t)
	r1, err := first.Client().PrepareSpeaker(ctx, req)
	require.NoError(t, err)
	require.True(t, r1.Computed)
	r2, err := first.Client().PrepareSpeaker(ctx, req)
	require.NoError(t, err)
	require.False(t, r2.Computed)
	require.Equal(t, r1.CachePath, r2.CachePath)
	require.Equal(t, 1, b.computations(t))

	second := b.start(t)
	r3, err := second.Client().PrepareSpeaker(ctx, req)
	require.NoError(t, err)
	require.False(t, r3.Computed, "a new host loads the cache file")
	h, err := second.Client().Health(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), h.Counters["conditioning_loaded"])
	require.Equal(t, int64(0), h.Counters["conditioning_computed"])
	require.Equal(t, 1, b.computations(t))

	// A different model version is a different cache key.
	third := b.start(t, "--model-version", "go-test-v2")
	r4, err := third.Client().PrepareSpeaker(ctx, req)
	require.NoError(t, err)
	require.True(t, r4.Computed)
	require.NotEqual(t, r1.CachePath, r4.CachePath)
	require.Equal(t, 2, b.computations(t))
}
