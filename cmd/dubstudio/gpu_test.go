package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/config"
	"dubstudio/gpu"
	"dubstudio/gpu/ttshost"
	"dubstudio/tts"
)

func testConfig(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	cfg, err := config.LoadFrom(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	return cfg
}

func TestHostCommandFollowsTheProfile(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, map[string]string{"ENGINE": "indextts", "INDEXTTS_MODEL_DIR": "/opt/ckpt", "INDEXTTS_VARIANT": "2.5",
		"HOST_PYTHON": "/venv/bin/python", "DUBSTUDIO_HOSTS_DIR": "/hosts", "INDEXTTS_DIR": "/src/index-tts"})
	p := gpu.DefaultProfile()
	require.Equal(t, []string{"/venv/bin/python", "/hosts/indextts_host.py", "--model-dir", "/opt/ckpt", "--variant", "2.5",
		"--model-version", "IndexTTS-2.5", "--fp16", "--no-qwen-emo"}, hostCommand(cfg, engineIndexTTS, p))
	p.FP16, p.EmotionTextModel = false, true
	require.Equal(t, []string{"/venv/bin/python", "/hosts/indextts_host.py", "--model-dir", "/opt/ckpt", "--variant", "2.5",
		"--model-version", "IndexTTS-2.5", "--qwen-emo"}, hostCommand(cfg, engineIndexTTS, p))
	require.Equal(t, []string{"/venv/bin/python", "/hosts/bench_host.py", "--gpt-dtype", "fp32"}, hostCommand(cfg, engineBench, p))
	// One beam: the host samples (its default with --beams 1, no --greedy).
	p.Batching, p.Concurrency, p.Beams, p.KVCacheGiB = true, 64, 1, 2
	require.Equal(t, []string{"/venv/bin/python", "/hosts/bench_host.py", "--gpt-dtype", "fp32", "--batch", "--max-sequences", "64",
		"--beams", "1", "--kv-cache-bytes", "2147483648", "--s2mel-dtype", "fp32"}, hostCommand(cfg, engineBench, p))
	p.S2melPrecision = gpu.S2melBF16
	require.Equal(t, []string{"/venv/bin/python", "/hosts/indextts_host.py", "--model-dir", "/opt/ckpt", "--variant", "2.5",
		"--model-version", "IndexTTS-2.5", "--qwen-emo", "--batch", "--max-sequences", "64", "--beams", "1",
		"--kv-cache-bytes", "2147483648", "--s2mel-dtype", "bf16"}, hostCommand(cfg, engineIndexTTS, p))
	p.S2melPrecision = "" // a profile stored before the setting
	require.Contains(t, hostCommand(cfg, engineBench, p), "fp32")
	require.True(t, batches(engineIndexTTS))
	require.True(t, batches(engineBench))
	require.False(t, batches(engineSimulator))
	env := hostEnv(cfg, engineIndexTTS)
	require.Contains(t, env, "HF_HUB_OFFLINE=1")
	require.Contains(t, env[len(env)-1], "PYTHONPATH=/src/index-tts")
	require.InDelta(t, 25, tokensPerSecond(cfg, engineIndexTTS), 0)

	_, err := config.LoadFrom(func(k string) (string, bool) {
		if k == "ENGINE" {
			return "indextts", true
		}
		return "", false
	})
	require.ErrorContains(t, err, "INDEXTTS_MODEL_DIR")
}

func TestSelectGPUs(t *testing.T) {
	t.Parallel()
	devs := []gpu.Device{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b"}}
	require.Equal(t, devs, selectGPUs(devs, nil))
	require.Equal(t, devs[1:], selectGPUs(devs, []string{"1"}))
	require.Equal(t, devs[:1], selectGPUs(devs, []string{"GPU-a", "7"}))
	require.Empty(t, selectGPUs(devs, []string{"GPU-z"}))
}

// Without a GPU and without a database, the command calibrates the simulated card and
// writes its result.
func TestCalibrateCommandWithoutDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("renders lines at the simulator's speed")
	}
	t.Parallel()
	out := filepath.Join(t.TempDir(), "calibration.json")
	samples := filepath.Join(t.TempDir(), "samples.json")
	cfg := testConfig(t, map[string]string{"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none"})
	err := calibrateCmd(context.Background(), cfg, slog.New(slog.DiscardHandler), []string{"-engine", "simulator", "-db=false",
		"-max-gen", "2", "-long-threshold", "1", "-buckets", "0.5,1,2", "-max-concurrency", "2", "-lines-per-step", "3",
		"-out", out, "-samples-out", samples})
	require.NoError(t, err)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	var res gpu.CalibrationResult
	require.NoError(t, json.Unmarshal(data, &res))
	require.Equal(t, simulatedGPU, res.GPU.UUID)
	require.Len(t, res.Analysis, 3)
	require.Equal(t, []int{1, 2}, []int{res.Verdict.Steps[0].Concurrency, res.Verdict.Steps[1].Concurrency})
	require.Positive(t, res.Recommended)
	data, err = os.ReadFile(samples)
	require.NoError(t, err)
	var pts []map[string]any
	require.NoError(t, json.Unmarshal(data, &pts))
	require.NotEmpty(t, pts, "NVML samples of the run, for the record")

	require.ErrorContains(t, calibrateCmd(context.Background(), cfg, slog.New(slog.DiscardHandler),
		[]string{"-engine", "simulator", "-db=false", "-apply"}), "-apply needs the database")
}

// A batching profile needs an engine whose hosts batch: the simulator engine's
// worker hosts do not.
func TestCalibrateCommandRefusesBatchingWithoutABatchingEngine(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, map[string]string{"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none"})
	err := calibrateCmd(context.Background(), cfg, slog.New(slog.DiscardHandler), []string{"-engine", "simulator", "-db=false",
		"-batching", "-concurrency", "16"})
	require.ErrorContains(t, err, "cannot batch")
}

// TestBatchingIndexTTSHostSamplesWithOneBeam starts the IndexTTS batching host with
// the command line a profile of one beam and s2mel in bf16 gives (hostCommand), on the
// stand-ins of IndexTTS2's modules over Debian's PyTorch on the CPU: it serves
// protocol 2, samples (its health says so), and renders a line. Skipped without a
// python3 that has torch.
func TestBatchingIndexTTSHostSamplesWithOneBeam(t *testing.T) {
	t.Parallel()
	python := "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		t.Skipf("%s has no torch: %v", python, err)
	}
	hosts, err := filepath.Abs(filepath.Join("..", "..", "tts", "hosts"))
	require.NoError(t, err)
	// The stand-in indextts and torchaudio over real torch (not the directory's torch shim).
	pkgs := t.TempDir()
	for _, name := range []string{"indextts", "torchaudio"} {
		require.NoError(t, os.Symlink(filepath.Join(hosts, "testdata", "standin", name), filepath.Join(pkgs, name)))
	}
	cfg := testConfig(t, map[string]string{"ENGINE": "indextts", "INDEXTTS_VARIANT": "2", "HOST_PYTHON": python,
		"INDEXTTS_MODEL_DIR": filepath.Join(hosts, "testdata", "standin-model", "2"), "DUBSTUDIO_HOSTS_DIR": hosts,
		"INDEXTTS_DIR": pkgs})
	p := gpu.DefaultProfile()
	p.FP16, p.Batching, p.Concurrency, p.Beams, p.KVCacheGiB, p.S2melPrecision = false, true, 2, 1, 0.01, gpu.S2melBF16
	l := ttshost.NewLauncher(ttshost.LauncherConfig{Name: engineIndexTTS,
		Command: func(gpu.LaunchOpts) ([]string, error) { return hostCommand(cfg, engineIndexTTS, p), nil },
		Env:     append(hostEnv(cfg, engineIndexTTS), "INDEXTTS_DEVICE=cpu", "INDEXTTS_DIFFUSION_STEPS=3")})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := l.Launch(ctx, gpu.LaunchOpts{GPU: "CPU", ID: "cpu0"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Stop(context.Background()) })
	host := h.(*ttshost.PinnedHost)
	b := host.BatchInfo()
	require.NotNil(t, b, "a batching host")
	require.Equal(t, 1, b.Beams)
	require.Equal(t, tts.DecodeSample, b.Decode, "one beam samples")
	require.Equal(t, 2, b.MaxSequences)
	require.Positive(t, b.ActivationBytesPerSecond, "measured at load")

	dir := t.TempDir()
	ref := filepath.Join(dir, "ref.wav")
	require.NoError(t, os.WriteFile(ref, toneWAV(16000, 2), 0o600))
	res, err := host.Engine().Synthesize(ctx, tts.Request{Text: "The ship sails at dawn.", Language: "en",
		Speaker: tts.Speaker{ReferenceAudioPath: ref}, MaxMelTokens: 20, Seed: 7, OutputPath: filepath.Join(dir, "line.wav")})
	require.NoError(t, err)
	require.NotNil(t, res.Sequence)
	require.Positive(t, res.Tokens)
	require.Positive(t, res.AudioSeconds)
}

// toneWAV is seconds of a 16-bit mono tone at rate.
func toneWAV(rate, seconds int) []byte {
	n := rate * seconds * 2
	h := make([]byte, 44, 44+n)
	copy(h[0:], "RIFF")
	binary.LittleEndian.PutUint32(h[4:], uint32(36+n))
	copy(h[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(h[16:], 16)
	binary.LittleEndian.PutUint16(h[20:], 1)
	binary.LittleEndian.PutUint16(h[22:], 1)
	binary.LittleEndian.PutUint32(h[24:], uint32(rate))
	binary.LittleEndian.PutUint32(h[28:], uint32(rate*2))
	binary.LittleEndian.PutUint16(h[32:], 2)
	binary.LittleEndian.PutUint16(h[34:], 16)
	copy(h[36:], "data")
	binary.LittleEndian.PutUint32(h[40:], uint32(n))
	for i := range rate * seconds {
		h = binary.LittleEndian.AppendUint16(h, uint16(int16(8000*math.Sin(float64(i)*0.05))))
	}
	return h
}
