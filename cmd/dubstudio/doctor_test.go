package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/config"
)

// doctorConfig points the doctor at the stand-in torch and IndexTTS of tts/hosts (no GPU).
func doctorConfig(t *testing.T) *config.Config {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	hosts, err := filepath.Abs(filepath.Join("..", "..", "tts", "hosts"))
	require.NoError(t, err)
	t.Setenv("PYTHONDONTWRITEBYTECODE", "1")
	return &config.Config{HostPython: python, HostsDir: hosts, IndexTTSDir: filepath.Join(hosts, "testdata", "standin"),
		IndexTTSVariant: "2"}
}

func TestDoctor(t *testing.T) {
	cfg := doctorConfig(t)
	ctx := context.Background()
	for _, variant := range []string{"2", "2.5"} {
		var out bytes.Buffer
		dir := filepath.Join(cfg.HostsDir, "testdata", "standin-model", variant)
		failed, err := runDoctor(ctx, cfg, doctorOpts{modelDir: dir, variant: variant}, &out)
		require.NoError(t, err)
		require.Zero(t, failed, out.String())
		for _, want := range []string{"OK   environment: ", "OK   imports: indextts.infer_v", "OK   torch: torch 0.0+standin",
			"OK   gpt shapes: vocabulary ", "OK   hf_cache BigVGAN: ", "OK   bigvgan kernel: custom CUDA kernel",
			"OK   free vram: ", "SKIP qwen emotion model"} {
			require.Contains(t, out.String(), want, variant)
		}
	}

	// A fault: 2.5 weights checked as IndexTTS-2 (its config.yaml and bpe.model do not fit).
	var out bytes.Buffer
	failed, err := runDoctor(ctx, cfg, doctorOpts{modelDir: filepath.Join(cfg.HostsDir, "testdata", "standin-model", "2.5"),
		variant: "2"}, &out)
	require.NoError(t, err)
	require.Positive(t, failed)
	require.Contains(t, out.String(), "FAIL config version: config.yaml says version 2.5, the host runs IndexTTS-2 -> ")
	require.Contains(t, out.String(), "FAIL model bpe.model: ")

	// An interpreter that does not start (a moved environment).
	bad := *cfg
	bad.HostPython = filepath.Join(t.TempDir(), "bin", "python")
	out.Reset()
	failed, err = runDoctor(ctx, &bad, doctorOpts{modelDir: "/nowhere", variant: "2"}, &out)
	require.NoError(t, err)
	require.Equal(t, 1, failed)
	require.Contains(t, out.String(), "FAIL environment: ")
	require.Contains(t, out.String(), "scripts/indextts_env.sh unpack")

	require.ErrorContains(t, doctorCmd(ctx, cfg, []string{"-model-dir", "/nowhere"}), "check(s) failed")
}
