package audio

import (
	"bytes"
	"image"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/i18n"
)

func TestProbeAcceptsAudio(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	soxWav := filepath.Join(dir, "sox.wav")
	cmd(t, "sox", "-n", "-r", "44100", "-c", "2", "-b", "16", soxWav, "synth", "1.5", "sine", "300")

	tests := []struct {
		name, path, format, codec string
		rate, channels            int
		dur                       time.Duration
	}{
		{"wav", soxWav, FormatWAV, "pcm_s16le", 44100, 2, 1500 * time.Millisecond},
		{"mp3", tone(t, dir, "a.mp3", "2", "44100"), FormatMP3, "mp3", 44100, 1, 2 * time.Second},
		{"flac", tone(t, dir, "a.flac", "2", "48000"), FormatFLAC, "flac", 48000, 1, 2 * time.Second},
		{"ogg", tone(t, dir, "a.ogg", "2", "48000"), FormatOGG, "vorbis", 48000, 1, 2 * time.Second},
		{"opus in ogg", tone(t, dir, "a.opus", "2", "48000"), FormatOGG, "opus", 48000, 1, 2 * time.Second},
		// The extension lies: the content decides.
		{"flac named .mp3", rename(t, tone(t, dir, "b.flac", "1", "22050"), "b.mp3"), FormatFLAC, "flac", 22050, 1, time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			info, err := ProbeReference(ctxT(t), tc.path)
			require.NoError(t, err)
			require.Equal(t, tc.format, info.Format)
			require.Equal(t, tc.codec, info.Codec)
			require.Equal(t, tc.rate, info.SampleRate)
			require.Equal(t, tc.channels, info.Channels)
			// Lossy codecs add encoder delay and padding.
			require.InDelta(t, tc.dur.Seconds(), info.Duration.Seconds(), 0.08)
		})
	}
}

func rename(t *testing.T, from, toName string) string {
	t.Helper()
	to := filepath.Join(filepath.Dir(from), toName)
	require.NoError(t, os.Rename(from, to))
	return to
}

func TestProbeRefusesWhatIsNotAudio(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o644))
		return p
	}
	cut := func(src, name string, keep func(n int) int) string {
		data, err := os.ReadFile(src)
		require.NoError(t, err)
		return write(name, data[:keep(len(data))])
	}
	pngPath := filepath.Join(dir, "image.wav")
	f, err := os.Create(pngPath)
	require.NoError(t, err)
	require.NoError(t, png.Encode(f, image.NewRGBA(image.Rect(0, 0, 16, 16))))
	require.NoError(t, f.Close())

	wav := tone(t, dir, "full.wav", "3", "48000")
	flac := tone(t, dir, "full.flac", "3", "48000")
	mp3 := tone(t, dir, "full.mp3", "3", "44100")

	tests := []struct {
		name, path, key string
	}{
		{"zero bytes", write("empty.wav", nil), "audio.empty"},
		{"text named .wav", write("x.wav", []byte("RIFF? no, just a note to self\n")), "audio.unreadable"},
		{"png", pngPath, "audio.no_sound"},
		{"wav cut in half", cut(wav, "half.wav", func(n int) int { return n / 2 }), "audio.truncated"},
		{"wav header only", cut(wav, "hdr.wav", func(int) int { return 30 }), "audio.unreadable"},
		{"flac cut in half", cut(flac, "half.flac", func(n int) int { return n / 2 }), "audio.truncated"},
		{"mp3 cut in half", cut(mp3, "half.mp3", func(n int) int { return n / 2 }), "audio.truncated"},
		{"mkv cut in half", cut(shortSound(t, dir, "full.mkv", true), "half.mkv", func(n int) int { return n / 2 }), "audio.truncated"},
		{"mkv without durations cut in half", cut(shortSound(t, dir, "bare.mkv", false), "bare-half.mkv", func(n int) int { return n / 2 }), "audio.truncated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Probe(ctxT(t), tc.path)
			require.ErrorIs(t, err, ErrNotAudio)
			var ue *i18n.Error
			require.ErrorAs(t, err, &ue)
			require.Equal(t, tc.key, ue.Key, "error: %v", err)
			require.True(t, i18n.Has(ue.Key))
			require.NotContains(t, ue.In(i18n.ZH), "[", "untranslated: %s", ue.In(i18n.ZH))
		})
	}
}

func TestProbeOtherErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	_, err := Probe(ctxT(t), filepath.Join(dir, "missing.wav"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NotErrorIs(t, err, ErrNotAudio)

	_, err = Probe(ctxT(t), "-i.wav")
	require.ErrorIs(t, err, ErrInvalid)

	_, err = Probe(ctxT(t), dir)
	require.ErrorIs(t, err, ErrInvalid)
}

func TestCheckFormat(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckFormat(Info{Format: FormatOGG}, ReferenceFormats))
	err := CheckFormat(Info{Format: "mp4"}, ReferenceFormats)
	require.ErrorIs(t, err, ErrFormat)
	var ue *i18n.Error
	require.ErrorAs(t, err, &ue)
	require.Equal(t, "MP4 files are not accepted here. Use one of: WAV, MP3, FLAC, OGG.", ue.In(i18n.EN))
}

func TestProbeReferenceRefusesAAC(t *testing.T) {
	t.Parallel()
	p := tone(t, t.TempDir(), "a.m4a", "1", "48000")
	info, err := Probe(ctxT(t), p)
	require.NoError(t, err)
	require.Equal(t, "mp4", info.Format)
	require.Equal(t, "aac", info.Codec)
	_, err = ProbeReference(ctxT(t), p)
	require.ErrorIs(t, err, ErrFormat)
}

// shortSound writes a Matroska video of 10 s whose sound (FLAC) ends at 8 s. ffmpeg
// writes each stream's end in a DURATION tag; other muxers do not, and then only the
// container's duration (the picture's) is known: tags false renames the tags so.
func shortSound(t *testing.T, dir, name string, tags bool) string {
	t.Helper()
	p := filepath.Join(dir, name)
	ffmpegGen(t, "-f", "lavfi", "-i", "testsrc=size=64x48:rate=10:duration=10",
		"-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=8", "-pix_fmt", "yuv420p", "-c:a", "flac", p)
	if !tags {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p, bytes.ReplaceAll(data, []byte("DURATION"), []byte("DURATIOX")), 0o644))
	}
	return p
}

// TestProbeAcceptsSoundEndingBeforePicture probes Matroska videos whose sound ends
// 2 s before the picture: Matroska gives no stream a duration field, and the tail
// check once sought the end of the container, found no sound there and refused a
// valid file as truncated. With the tags, the sound's own length is read from them;
// without, the container's length is all there is, and the file's end is checked in
// any stream. (Cut in half, both are refused: TestProbeRefusesWhatIsNotAudio.)
func TestProbeAcceptsSoundEndingBeforePicture(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		tags bool
		dur  time.Duration
	}{{"tagged.mkv", true, 8 * time.Second}, {"bare.mkv", false, 10 * time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			info, err := Probe(ctxT(t), shortSound(t, dir, tc.name, tc.tags))
			require.NoError(t, err)
			require.Equal(t, "matroska", info.Format)
			require.Equal(t, tc.dur, info.Duration)
		})
	}
}
