package audio

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// cmd runs a program the test needs to make its fixtures.
func cmd(t testing.TB, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s %v: %s", name, args, out)
}

// ffmpegGen runs ffmpeg quietly with args, overwriting outputs.
func ffmpegGen(t testing.TB, args ...string) {
	t.Helper()
	cmd(t, "ffmpeg", append([]string{"-v", "error", "-nostdin", "-y"}, args...)...)
}

// tone writes a sine of seconds at rate (mono, 16 bit) to dir/name, in the format
// the extension names, and returns its path.
func tone(t testing.TB, dir, name string, seconds string, rate string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	ffmpegGen(t, "-f", "lavfi", "-i", "sine=frequency=440:sample_rate="+rate+":duration="+seconds, p)
	return p
}

// speech writes text spoken by espeak-ng (22050 Hz mono 16 bit) to dir/name.
func speech(t testing.TB, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	cmd(t, "espeak-ng", "-w", p, text)
	return p
}

func ctxT(t testing.TB) context.Context { return t.Context() }
