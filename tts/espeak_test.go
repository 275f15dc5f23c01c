package tts

import (
	"context"
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
