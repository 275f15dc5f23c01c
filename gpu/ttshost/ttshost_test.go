package ttshost_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/gpu"
	"dubstudio/gpu/ttshost"
	"dubstudio/internal/simdev"
	"dubstudio/tts"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// standInLauncher launches tts/hosts/indextts_host.py against the stand-in IndexTTS
// (no torch, no GPU).
func standInLauncher(t *testing.T, nvml func(string, int) (int64, bool)) *ttshost.Launcher {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	hosts, err := filepath.Abs("../../tts/hosts")
	require.NoError(t, err)
	models := filepath.Join(hosts, "testdata", "standin-model", "2") // checked by the host before loading
	logs := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("host log:\n%s", logs.b.String())
		}
	})
	return ttshost.NewLauncher(ttshost.LauncherConfig{
		Name: "indextts",
		Command: func(gpu.LaunchOpts) ([]string, error) {
			return []string{python, filepath.Join(hosts, "indextts_host.py"), "--model-dir", models}, nil
		},
		Env:           []string{"PYTHONPATH=" + filepath.Join(hosts, "testdata", "standin"), "PYTHONDONTWRITEBYTECODE=1"},
		Stderr:        func(gpu.LaunchOpts) io.Writer { return logs },
		ReadyInterval: 20 * time.Millisecond,
		ProcessBytes:  nvml,
	})
}

func TestLauncherRunsAProtocolHost(t *testing.T) {
	t.Parallel()
	l := standInLauncher(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := l.LaunchHost(ctx, gpu.LaunchOpts{GPU: "GPU-x", ID: "GPU-x/0", Env: []string{"CUDA_VISIBLE_DEVICES=GPU-x"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Kill() })

	require.Positive(t, h.PID())
	require.Equal(t, 1, h.Concurrency())
	require.Equal(t, "GPU-x", h.GPU())
	require.NoError(t, h.Health(ctx))
	require.EqualValues(t, 4_300_000_000, h.Info().ResidentBytes)
	mem, counter, err := h.Memory(ctx)
	require.NoError(t, err)
	require.Equal(t, gpu.CounterTorchReserved, counter, "no NVML here: the host's own figure")
	require.Positive(t, mem)

	ref := filepath.Join(t.TempDir(), "ref.wav")
	require.NoError(t, tts.WriteWAV(ref, 16000, make([]int16, 16000)))
	res, err := h.Engine().Synthesize(ctx, tts.Request{Text: "A short line to say.", OutputPath: filepath.Join(t.TempDir(), "o.wav"),
		Speaker: tts.Speaker{ReferenceAudioPath: ref}})
	require.NoError(t, err)
	require.Positive(t, res.AudioSeconds)
	cached, err := h.ReleaseCache(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, cached, int64(0))

	// Killed: the process is gone and says so.
	require.NoError(t, h.Kill())
	select {
	case <-h.Exited():
	case <-ctx.Done():
		t.Fatal("the host did not exit")
	}
	require.Error(t, h.Health(ctx))
}

func TestLauncherPrefersNVML(t *testing.T) {
	t.Parallel()
	l := standInLauncher(t, func(uuid string, pid int) (int64, bool) { return 6 << 30, uuid == "GPU-y" })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := l.LaunchHost(ctx, gpu.LaunchOpts{GPU: "GPU-y", ID: "GPU-y/0"})
	require.NoError(t, err)
	defer func() { require.NoError(t, h.Stop(ctx)) }()
	mem, counter, err := h.Memory(ctx)
	require.NoError(t, err)
	require.Equal(t, gpu.CounterNVML, counter)
	require.EqualValues(t, 6<<30, mem)
}

func TestLauncherReportsAHostThatDiesLoading(t *testing.T) {
	t.Parallel()
	l := ttshost.NewLauncher(ttshost.LauncherConfig{Name: "x",
		Command: func(gpu.LaunchOpts) ([]string, error) {
			return []string{"sh", "-c", "echo LISTENING unix:/nonexistent/x.sock; sleep 0.3; exit 1"}, nil
		}, Stderr: func(gpu.LaunchOpts) io.Writer { return os.Stderr }})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := l.Launch(ctx, gpu.LaunchOpts{GPU: "G", ID: "G/0"})
	require.Error(t, err)
	require.Contains(t, err.Error(), "exited")
}

func TestSimHost(t *testing.T) {
	t.Parallel()
	dev := simdev.New(24 * gpu.GiB)
	l := &ttshost.SimLauncher{Devices: map[string]*simdev.Device{"GPU-s": dev}, Config: tts.SimulatorConfig{FollowTarget: true}}
	ctx := context.Background()
	_, err := l.Launch(ctx, gpu.LaunchOpts{GPU: "GPU-other"})
	require.ErrorIs(t, err, gpu.ErrInvalid)
	h, err := l.LaunchHost(ctx, gpu.LaunchOpts{GPU: "GPU-s", ID: "0"})
	require.NoError(t, err)
	require.Equal(t, []simdev.ProcessInfo{{PID: h.PID(), UsedBytes: tts.SimResidentBytes}}, dev.Processes())
	require.NoError(t, h.Health(ctx))
	require.Equal(t, 1, h.Concurrency())

	out := filepath.Join(t.TempDir(), "o.wav")
	_, err = h.Engine().Synthesize(ctx, tts.Request{Text: "Hello there.", TargetSeconds: 10, OutputPath: out})
	require.NoError(t, err)
	mem, counter, err := h.Memory(ctx)
	require.NoError(t, err)
	require.Equal(t, gpu.CounterNVML, counter)
	require.Greater(t, mem, int64(tts.SimResidentBytes), "the cache kept the peak")
	cached, err := h.ReleaseCache(ctx)
	require.NoError(t, err)
	require.Zero(t, cached)

	// A crash mid-request is the process exiting.
	h.Simulator().Inject(tts.FaultCrash)
	_, err = h.Engine().Synthesize(ctx, tts.Request{Text: "Hello there.", OutputPath: out})
	require.ErrorIs(t, err, tts.ErrUnavailable)
	select {
	case <-h.Exited():
	default:
		t.Fatal("a crashed simulated host is not exited")
	}
	require.Error(t, h.ExitErr())
	require.Error(t, h.Health(ctx))
	require.Empty(t, dev.Processes(), "its memory is free")
}

func TestLauncherPassesTheWeightsRole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := filepath.Join(dir, "args")
	l := ttshost.NewLauncher(ttshost.LauncherConfig{Name: "x", SocketDir: filepath.Join(dir, "s"),
		Command: func(gpu.LaunchOpts) ([]string, error) {
			return []string{"sh", "-c", `printf '%s\n' "$@" > ` + args, "host"}, nil
		}, Stderr: func(gpu.LaunchOpts) io.Writer { return io.Discard }})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	argv := func(role gpu.WeightsRole) []string {
		_, err := l.Launch(ctx, gpu.LaunchOpts{GPU: "G", GPUIndex: 1, ID: "G/0", Weights: role})
		require.Error(t, err, "the stand-in exits at once")
		b, err := os.ReadFile(args)
		require.NoError(t, err)
		return strings.Fields(string(b))
	}
	own := argv(gpu.WeightsOwn)
	require.Equal(t, "--socket", own[0])
	require.NotContains(t, own, "--share-weights")
	share := filepath.Join(dir, "s", "w1.sock")
	require.Equal(t, []string{"--share-weights", share, "--weights-role", "lend", "--socket"}, argv(gpu.WeightsLend)[:5])
	require.Equal(t, []string{"--share-weights", share, "--weights-role", "borrow", "--socket"}, argv(gpu.WeightsBorrow)[:5])
}

func TestSimHostsShareWeights(t *testing.T) {
	t.Parallel()
	dev := simdev.New(24 * gpu.GiB)
	l := &ttshost.SimLauncher{Devices: map[string]*simdev.Device{"GPU-s": dev}, Config: tts.SimulatorConfig{FollowTarget: true}}
	ctx := context.Background()
	_, err := l.Launch(ctx, gpu.LaunchOpts{GPU: "GPU-s", ID: "1", Weights: gpu.WeightsBorrow})
	require.ErrorContains(t, err, "no host lends the weights")

	lender, err := l.LaunchHost(ctx, gpu.LaunchOpts{GPU: "GPU-s", ID: "0", Weights: gpu.WeightsLend})
	require.NoError(t, err)
	borrower, err := l.LaunchHost(ctx, gpu.LaunchOpts{GPU: "GPU-s", ID: "1", Weights: gpu.WeightsBorrow})
	require.NoError(t, err)
	require.Equal(t, int64(tts.SimResidentBytes+ttshost.SimBorrowerBytes), dev.Used())
	out := filepath.Join(t.TempDir(), "o.wav")
	_, err = borrower.Engine().Synthesize(ctx, tts.Request{Text: "Hello there.", TargetSeconds: 2, OutputPath: out})
	require.NoError(t, err)

	// Without its lender, the borrower crashes at its next request.
	require.NoError(t, lender.Kill())
	_, err = borrower.Engine().Synthesize(ctx, tts.Request{Text: "Hello there.", TargetSeconds: 2, OutputPath: out})
	require.ErrorIs(t, err, tts.ErrUnavailable)
	<-borrower.Exited()
	require.Empty(t, dev.Processes())
	_, err = l.Launch(ctx, gpu.LaunchOpts{GPU: "GPU-s", ID: "1", Weights: gpu.WeightsBorrow})
	require.ErrorContains(t, err, "no host lends the weights", "a dead lender lends nothing")
}
