// Package mediatest makes real media for tests at test time: short videos from
// ffmpeg's test sources with speech by espeak-ng muxed in, nothing committed.
package mediatest

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// Video makes an MP4 in dir named name: seconds long, ffmpeg's testsrc2 picture at
// 320×240 and 25 fps (H.264) and espeak-ng saying text over a quiet tone (AAC,
// 44.1 kHz stereo), as an editor's upload of a programme would be. It skips the test
// where ffmpeg or espeak-ng is missing.
func Video(t testing.TB, dir, name string, seconds int, text string) string {
	t.Helper()
	return VideoSized(t, dir, name, seconds, "320x240", text)
}

// VideoSized is Video with the picture's size (WIDTHxHEIGHT).
func VideoSized(t testing.TB, dir, name string, seconds int, size, text string) string {
	t.Helper()
	return VideoAt(t, dir, name, seconds, size, "25", text)
}

// VideoAt is VideoSized with the picture's frame rate, as ffmpeg takes it ("30",
// "30000/1001").
func VideoAt(t testing.TB, dir, name string, seconds int, size, rate, text string) string {
	t.Helper()
	for _, tool := range []string{"ffmpeg", "ffprobe", "espeak-ng"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	speech := filepath.Join(dir, name+".speech.wav")
	if out, err := exec.Command("espeak-ng", "-w", speech, text).CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng: %v: %s", err, out)
	}
	out := filepath.Join(dir, name)
	d := strconv.Itoa(seconds)
	cmd := exec.Command("ffmpeg", "-v", "error", "-nostdin",
		"-f", "lavfi", "-i", "testsrc2=size="+size+":rate="+rate+":duration="+d,
		"-i", speech,
		"-f", "lavfi", "-i", "sine=frequency=220:sample_rate=44100:duration="+d,
		"-filter_complex", "[1:a]aresample=44100,apad[s];[2:a]volume=0.05[b];[s][b]amix=inputs=2:duration=longest,aformat=channel_layouts=stereo[a]",
		"-map", "0:v", "-map", "[a]", "-t", d,
		"-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac", "-y", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg cannot make a test video: %v: %s", err, b)
	}
	return out
}
