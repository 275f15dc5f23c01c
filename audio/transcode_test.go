package audio

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/i18n"
)

// video writes a 2 s test video (testsrc picture, 440 Hz stereo sound at 44.1 kHz
// unless silent) and returns its path.
func video(t *testing.T, dir, name string, withSound bool) string {
	t.Helper()
	p := filepath.Join(dir, name)
	args := []string{"-f", "lavfi", "-i", "testsrc=size=64x48:rate=10:duration=2"}
	if withSound {
		args = append(args, "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100:duration=2", "-ac", "2", "-shortest")
	}
	ffmpegGen(t, append(args, "-pix_fmt", "yuv420p", p)...)
	return p
}

func TestExtractAudioFromVideo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"clip.mp4", "clip.mkv"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "source.wav")
			require.NoError(t, ExtractAudio(ctxT(t), video(t, dir, name, true), out))
			info, err := Probe(ctxT(t), out)
			require.NoError(t, err)
			require.Equal(t, Info{Format: FormatWAV, Codec: "pcm_s16le", SampleRate: 48000, Channels: 2,
				Duration: info.Duration}, info)
			require.InDelta(t, 2, info.Duration.Seconds(), 0.05)
			pcm, err := ReadWAVFile(out)
			require.NoError(t, err)
			l, ok := integratedLoudness(downmix(pcm), 48000)
			require.True(t, ok)
			require.Greater(t, l, -30.0, "the tone came through")
		})
	}
}

func TestExtractAudioRefusesSilentVideo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "source.wav")
	err := ExtractAudio(ctxT(t), video(t, dir, "mute.mp4", false), out)
	require.ErrorIs(t, err, ErrNotAudio)
	var ue *i18n.Error
	require.ErrorAs(t, err, &ue)
	require.Equal(t, "audio.no_sound", ue.Key)
	require.NoFileExists(t, out)
}

func TestTranscodeFormats(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := speech(t, dir, "line.wav", "Transcoding test.")
	for _, format := range []string{FormatWAV, FormatFLAC, FormatMP3, FormatOGG} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "out."+format)
			require.NoError(t, Transcode(ctxT(t), TranscodeParams{InputPath: src, OutputPath: out, Format: format, Channels: 2}))
			info, err := ProbeReference(ctxT(t), out)
			require.NoError(t, err)
			require.Equal(t, format, info.Format)
			require.Equal(t, 48000, info.SampleRate)
			require.Equal(t, 2, info.Channels)
		})
	}
	// Lossless output is byte-reproducible.
	for _, format := range []string{FormatWAV, FormatFLAC} {
		a, b := filepath.Join(dir, "a."+format), filepath.Join(dir, "b."+format)
		require.NoError(t, Transcode(ctxT(t), TranscodeParams{InputPath: src, OutputPath: a, Format: format}))
		require.NoError(t, Transcode(ctxT(t), TranscodeParams{InputPath: src, OutputPath: b, Format: format}))
		require.Equal(t, fileSum(t, a), fileSum(t, b), format)
	}
	require.ErrorIs(t, Transcode(ctxT(t), TranscodeParams{InputPath: src, OutputPath: filepath.Join(dir, "x.aac"), Format: "aac"}), ErrInvalid)
	require.ErrorIs(t, Transcode(ctxT(t), TranscodeParams{InputPath: src, OutputPath: "-y.wav"}), ErrInvalid)
}

func TestSegmentIsSampleExact(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A 48 kHz source whose sample i holds i mod 30000: any offset error shows.
	const n = 3 * 48000
	src := writeClip(t, dir, "ramp.wav", n, func(i int) int16 { return int16(i % 30000) })
	out := filepath.Join(dir, "seg.wav")
	start, end := 1234567*time.Microsecond, 2500*time.Millisecond // 59259.216 .. 120000 samples
	require.NoError(t, Segment(ctxT(t), src, start, end, out))
	seg, err := ReadWAVFile(out)
	require.NoError(t, err)
	require.Equal(t, int((end-start)*48000/time.Second), seg.Frames())
	first := int(seg.Samples[0])
	require.InDelta(t, 59259%30000, first, 1, "starts within one sample")
	for i, s := range seg.Samples {
		require.Equal(t, int16((first+i)%30000), s, "sample %d", i)
	}

	// Past the end of the source: padded with silence to the exact length.
	require.NoError(t, Segment(ctxT(t), src, 2500*time.Millisecond, 3500*time.Millisecond, out))
	seg, err = ReadWAVFile(out)
	require.NoError(t, err)
	require.Equal(t, 48000, seg.Frames())
	require.NotZero(t, seg.Samples[23999])
	require.Zero(t, seg.Samples[24001])

	require.ErrorIs(t, Segment(ctxT(t), src, 4*time.Second, 5*time.Second, out), ErrInvalid)
	require.ErrorIs(t, Segment(ctxT(t), src, time.Second, time.Second, out), ErrInvalid)
}

func TestSegmentOfVideo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "ref.wav")
	require.NoError(t, Segment(ctxT(t), video(t, dir, "v.mp4", true), 500*time.Millisecond, 1750*time.Millisecond, out))
	seg, err := ReadWAVFile(out)
	require.NoError(t, err)
	require.Equal(t, 60000, seg.Frames())
	require.Equal(t, 2, seg.Channels)
	l, ok := integratedLoudness(downmix(seg), 48000)
	require.True(t, ok)
	require.Greater(t, l, -30.0)
	// The tone fills the segment: no silence at either end.
	require.NotZero(t, seg.Samples[10])
	require.NotZero(t, seg.Samples[len(seg.Samples)-10])
}

func TestCancelledWriteLeavesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := tone(t, dir, "t.wav", "1", "48000")
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	out := filepath.Join(dir, "out.wav")
	require.ErrorIs(t, Segment(ctx, src, 0, time.Second, out), context.Canceled)
	_, err := Fit(ctx, FitParams{InputPath: src, OutputPath: out, SlotMs: 800})
	require.ErrorIs(t, err, context.Canceled)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
}

// TestExtractAudioKeepsALateStartInTime extracts the sound of videos whose audio
// starts 0.478 s after the picture (-itsoffset; MPEG-TS, MXF and remuxed files often
// do): a click 1 s into the audio lands 1.478 s into the WAV, where it plays against
// the picture. PCM in Matroska keeps the offset to the sample; AAC in MP4 within a
// millisecond (the MP4 muxer writes the edit list in milliseconds, and the encoder's
// priming is counted from there); MPEG-TS is one where ffmpeg itself, given only the
// audio, starts it at 0.
func TestExtractAudioKeepsALateStartInTime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const want = 70_944 // 1.478 s at 48 kHz
	for _, tc := range []struct {
		name, codec string
		within      int
	}{{"late.mkv", "pcm_s16le", 1}, {"late.mp4", "aac", 48}, {"late.ts", "aac", 48}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := filepath.Join(dir, tc.name)
			ffmpegGen(t, "-f", "lavfi", "-i", "testsrc=size=64x48:rate=25:duration=3",
				"-itsoffset", "0.478", "-f", "lavfi", "-i", "aevalsrc='if(eq(n,48000),0.9,0)':s=48000:d=2",
				"-pix_fmt", "yuv420p", "-c:a", tc.codec, "-ac", "2", src)
			out := filepath.Join(t.TempDir(), "source.wav")
			require.NoError(t, ExtractAudio(ctxT(t), src, out))
			pcm, err := ReadWAVFile(out)
			require.NoError(t, err)
			click := 0
			for i := range pcm.Frames() {
				if abs16(pcm.Samples[i*pcm.Channels]) > abs16(pcm.Samples[click*pcm.Channels]) {
					click = i
				}
			}
			t.Logf("the click at sample %d (%+d)", click, click-want)
			require.InDelta(t, want, click, float64(tc.within), "the click at %.4f s", float64(click)/48000)
		})
	}
}

func abs16(v int16) int {
	if v < 0 {
		return -int(v)
	}
	return int(v)
}
