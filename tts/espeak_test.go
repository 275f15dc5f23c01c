package tts

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func newTestEspeak(t *testing.T) *Espeak {
	t.Helper()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		if _, err := exec.LookPath("espeak"); err != nil {
			t.Skip("espeak-ng is not installed")
		}
	}
	e, err := NewEspeak(context.Background(), EspeakConfig{Concurrency: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func TestEspeakSpeaks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTestEspeak(t)
	dir := t.TempDir()

	info, err := e.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, "espeak-ng", info.Model)
	require.Contains(t, info.Version, "eSpeak")
	require.True(t, info.DurationControl)
	require.Equal(t, 2, info.Concurrency)

	prep, err := e.PrepareSpeaker(ctx, PrepareRequest{ReferenceAudioPath: "/nonexistent.wav"})
	require.NoError(t, err)
	require.False(t, prep.Computed)

	en, err := e.Synthesize(ctx, Request{Text: "The quick brown fox jumps over the lazy dog.", Speaker: Speaker{Voice: "en-us"},
		OutputPath: filepath.Join(dir, "en.wav")})
	require.NoError(t, err)
	require.Equal(t, "espeak", en.Engine)
	require.Equal(t, 22050, en.SampleRate)
	require.Greater(t, en.AudioSeconds, 1.0)
	wi, err := ReadWAVInfo(en.OutputPath)
	require.NoError(t, err)
	require.InDelta(t, wi.Seconds, en.AudioSeconds, 1e-9)

	// Mandarin, with the voice picked from the language.
	zh, err := e.Synthesize(ctx, Request{Text: "我们明天早上出发。", OutputPath: filepath.Join(dir, "zh.wav")})
	require.NoError(t, err)
	require.Greater(t, zh.AudioSeconds, 0.5)

	// A slower rate makes longer audio.
	slow, err := e.Synthesize(ctx, Request{Text: "The quick brown fox jumps over the lazy dog.", Speaker: Speaker{Voice: "en-us"},
		DurationFactor: 2, OutputPath: filepath.Join(dir, "slow.wav")})
	require.NoError(t, err)
	require.Greater(t, slow.AudioSeconds, en.AudioSeconds*1.5)
	require.InDelta(t, 2.0, slow.DurationFactor, 0.05)
}

func TestEspeakTextIsNeverAnOption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTestEspeak(t)
	dir := t.TempDir()
	for i, text := range []string{"--help", "-v xx -w /etc/passwd hello", "-", "$(rm -rf /); `id`"} {
		res, err := e.Synthesize(ctx, Request{Text: text, Speaker: Speaker{Voice: "en"}, OutputPath: filepath.Join(dir, "t", string(rune('a'+i))+".wav")})
		require.NoError(t, err, text)
		require.Positive(t, res.AudioSeconds, text)
	}
}

func TestEspeakRejects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTestEspeak(t)
	out := filepath.Join(t.TempDir(), "x.wav")
	for _, voice := range []string{"-w", "--stdin", "en us", "../../etc/passwd", "a;b"} {
		_, err := e.Synthesize(ctx, Request{Text: "hello", Speaker: Speaker{Voice: voice}, OutputPath: out})
		require.ErrorIs(t, err, ErrInvalidInput, voice)
	}
	_, err := e.Synthesize(ctx, Request{Text: "hello", Speaker: Speaker{Voice: "nosuchvoice"}, OutputPath: out})
	require.ErrorIs(t, err, ErrInvalidInput)
	_, err = e.Synthesize(ctx, Request{Text: " ", OutputPath: out})
	require.ErrorIs(t, err, ErrInvalidInput)
	require.NoFileExists(t, out)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = e.Synthesize(cctx, Request{Text: "hello", OutputPath: out})
	require.ErrorIs(t, err, context.Canceled)

	_, err = NewEspeak(ctx, EspeakConfig{Binary: "/nonexistent/espeak-ng"})
	require.ErrorIs(t, err, ErrUnavailable)
	_, err = NewEspeak(ctx, EspeakConfig{DefaultVoice: "-x"})
	require.Error(t, err)
}

func TestVoiceForLanguage(t *testing.T) {
	t.Parallel()
	require.Equal(t, "cmn", VoiceForLanguage("zh"))
	require.Equal(t, "cmn", VoiceForLanguage("zh-CN"))
	require.Equal(t, "en-us", VoiceForLanguage("en"))
	require.Equal(t, "ja", VoiceForLanguage("ja"))
	require.Equal(t, "en-us", VoiceForLanguage("xx"))
}
