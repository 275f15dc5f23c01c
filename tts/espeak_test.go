package tts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEspeakSpeaks(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng is not installed")
	}
	e := NewEspeak(EspeakConfig{})
	ctx := context.Background()
	info, err := e.Info(ctx)
	require.NoError(t, err)
	require.True(t, info.DurationControl)
	require.Contains(t, info.Version, "espeak-ng")

	dir := t.TempDir()
	natural, err := e.Synthesize(ctx, Request{Text: "-v en --help; this starts with a dash", OutputPath: filepath.Join(dir, "a.wav")})
	require.NoError(t, err)
	require.Greater(t, natural.AudioSeconds, 1.0)
	require.Equal(t, 22050, natural.SampleRate)

	slow, err := e.Synthesize(ctx, Request{Text: "-v en --help; this starts with a dash", DurationFactor: 1.5, OutputPath: filepath.Join(dir, "b.wav")})
	require.NoError(t, err)
	require.Greater(t, slow.AudioSeconds, natural.AudioSeconds*1.2, "a larger duration factor speaks slower")

	zh, err := e.Synthesize(ctx, Request{Text: "你好，世界。", Speaker: Speaker{Voice: "cmn"}, OutputPath: filepath.Join(dir, "c.wav")})
	require.NoError(t, err)
	require.Greater(t, zh.AudioSeconds, 0.5)

	_, err = e.Synthesize(ctx, Request{Text: "hi", Speaker: Speaker{Voice: "en; rm -rf /"}, OutputPath: filepath.Join(dir, "d.wav")})
	require.ErrorIs(t, err, ErrInvalidInput)
	_, err = e.Synthesize(ctx, Request{Text: "hi", Speaker: Speaker{Voice: "xx-nope"}, OutputPath: filepath.Join(dir, "f.wav")})
	require.ErrorIs(t, err, ErrInvalidInput, "a voice espeak-ng lacks is the user's to fix, not a retry")
	_, err = e.Synthesize(ctx, Request{Text: "", OutputPath: filepath.Join(dir, "e.wav")})
	require.ErrorIs(t, err, ErrInvalidInput)
}

// TestEspeakIsDeterministic: two seeds give the same bytes, and the engine says so,
// so that the review view does not offer a new take that cannot differ.
func TestEspeakIsDeterministic(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng is not installed")
	}
	e := NewEspeak(EspeakConfig{})
	ctx := context.Background()
	info, err := e.Info(ctx)
	require.NoError(t, err)
	require.True(t, info.Deterministic)
	dir := t.TempDir()
	var outs [][]byte
	for i, seed := range []int64{11, 987654} {
		p := filepath.Join(dir, fmt.Sprintf("%d.wav", i))
		res, err := e.Synthesize(ctx, Request{Text: "The same line, said again.", Seed: seed, OutputPath: p})
		require.NoError(t, err)
		require.True(t, res.Deterministic, "the result says the seed did not matter")
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		outs = append(outs, b)
	}
	require.Equal(t, outs[0], outs[1], "another seed gives byte-identical audio")
}
