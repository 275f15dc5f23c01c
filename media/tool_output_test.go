package media

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// soundDuration reads silencedetect's findings as ffmpeg writes them: a recording of
// forty 0.25 s tones, each followed by 0.25 s of silence, has 10 s of sound, however
// many pauses it has.
func TestSoundDurationCountsEveryPause(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg is not installed")
	}
	path := filepath.Join(t.TempDir(), "beeps.wav")
	out, err := exec.Command("ffmpeg", "-v", "error", "-nostdin", "-f", "lavfi", "-i",
		"aevalsrc='if(lt(mod(t,0.5),0.25),0.5*sin(2*PI*440*t),0)':s=48000:d=20", "-y", path).CombinedOutput()
	require.NoError(t, err, string(out))
	sound, err := soundDuration(context.Background(), path, 20*time.Second)
	require.NoError(t, err)
	require.InDelta(t, 10, sound.Seconds(), 0.3)

	_, err = soundDuration(context.Background(), filepath.Join(t.TempDir(), "missing.wav"), time.Second)
	require.ErrorContains(t, err, "error measuring the silence")
}

func TestLineWriterSplitsWhatComesInPieces(t *testing.T) {
	t.Parallel()
	var got []string
	w := &lineWriter{line: func(s string) { got = append(got, s) }}
	for _, p := range []string{"out_time_us=1", "00\r\nprogress=continue\nout", "_time_us=2", "00\n", strings.Repeat("x", maxToolLine+1), "\nlast"} {
		n, err := w.Write([]byte(p))
		require.NoError(t, err)
		require.Equal(t, len(p), n)
	}
	require.Equal(t, []string{"out_time_us=100", "progress=continue", "out_time_us=200", ""}, got,
		"a line too long to be ffmpeg's is dropped, a last one without a newline not seen")
}

// A probe stopped by its context returns, even when a process the tool started still
// holds its output open: ffprobe runs through audio's runner, which gives up on the
// pipes (WaitDelay) once the tool is killed. The ffprobe here is a script that leaves
// such a process behind, since a real one does not on demand.
func TestProbeVideoReturnsOnceCancelledWhateverHoldsItsOutput(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "holder.pid")
	script := "#!/bin/sh\nsleep 300 &\necho $! > " + pidFile + "\nexec sleep 300\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ffprobe"), []byte(script), 0o700))
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	input := filepath.Join(dir, "input.mp4")
	require.NoError(t, os.WriteFile(input, []byte("anything"), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := ProbeVideo(ctx, input)
		done <- err
	}()
	var holder int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		holder, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 30*time.Second, 10*time.Millisecond)
	t.Cleanup(func() { _ = syscall.Kill(holder, syscall.SIGKILL) })
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(time.Minute):
		t.Fatal("ProbeVideo still waits for the process holding ffprobe's output")
	}
	require.NoError(t, syscall.Kill(holder, 0), "the holder still runs: the probe did not wait for it")
}
