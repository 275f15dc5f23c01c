package audio_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/audio"
)

// RunFFmpeg and RunFFprobe give the output and the tail of stderr; a program that
// ran and failed unwraps to ErrToolFailed, one cancelled to its context's error.
func TestRunToolsSayHowTheyEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var out bytes.Buffer
	_, err := audio.RunFFmpeg(ctx, []string{"-v", "error", "-nostdin", "-f", "lavfi", "-i", "sine=duration=0.1",
		"-f", "s16le", "-ac", "1", "-ar", "8000", "-"}, nil, &out)
	require.NoError(t, err)
	require.Equal(t, 1600, out.Len(), "0.1 s of 16-bit samples at 8 kHz")

	stderr, err := audio.RunFFprobe(ctx, []string{"-v", "error", "file:" + filepath.Join(t.TempDir(), "missing.wav")}, nil)
	require.ErrorIs(t, err, audio.ErrToolFailed)
	require.Contains(t, stderr, "No such file or directory")
	require.Contains(t, err.Error(), "No such file or directory")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = audio.RunFFmpeg(cancelled, []string{"-v", "error", "-f", "lavfi", "-i", "sine", "-f", "null", "-"}, nil, nil)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, audio.ErrToolFailed)
}

func TestFormatNameShortensDemuxers(t *testing.T) {
	t.Parallel()
	require.Equal(t, "mp4", audio.FormatName("mov,mp4,m4a,3gp,3g2,mj2"))
	require.Equal(t, "matroska", audio.FormatName("matroska,webm"))
	require.Equal(t, "wav", audio.FormatName("wav"))
}
