package audio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeClip writes a mono 48 kHz clip of n samples made by f.
func writeClip(t *testing.T, dir, name string, n int, f func(i int) int16) string {
	t.Helper()
	s := make([]int16, n)
	for i := range s {
		s[i] = f(i)
	}
	p := filepath.Join(dir, name)
	require.NoError(t, WriteWAVFile(p, PCM{SampleRate: 48000, Channels: 1, Samples: s}))
	return p
}

func TestAssemblePlacesClipsAtTheirOffsets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A clip whose first sample is a marker, the rest quiet: its position is visible.
	marker := writeClip(t, dir, "m.wav", 1000, func(i int) int16 {
		if i == 0 {
			return 20000
		}
		return 1
	})
	offsets := []int64{0, 1, 65535, 65536, 100_003, 200_000 - 500}
	var clips []Clip
	for _, o := range offsets {
		clips = append(clips, Clip{Path: marker, Offset: o})
	}
	out := filepath.Join(dir, "mix.wav")
	require.NoError(t, assemble(ctxT(t), AssembleParams{OutputPath: out, Samples: 200_000, Clips: clips}))
	mix, err := ReadWAVFile(out)
	require.NoError(t, err)
	require.Equal(t, 200_000, mix.Frames())
	require.Equal(t, 48000, mix.SampleRate)
	var found []int64
	for i, s := range mix.Samples {
		if s >= 20000 {
			found = append(found, int64(i))
		}
	}
	require.Equal(t, offsets, found)
	require.Equal(t, int16(1+1), mix.Samples[2], "overlapping clips add up")
	require.Zero(t, mix.Samples[1001])
	require.Equal(t, int16(1), mix.Samples[199_999], "the last clip is cut at the end")
}

func TestAssembleFittedTakes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	take := speech(t, dir, "take.wav", "Hello there.")
	fitted := filepath.Join(dir, "fit.wav")
	res, err := Fit(ctxT(t), FitParams{InputPath: take, OutputPath: fitted, SlotMs: 1500})
	require.NoError(t, err)
	clip, err := ReadWAVFile(fitted)
	require.NoError(t, err)

	startMs := 2345
	out := filepath.Join(dir, "mix.wav")
	require.NoError(t, assemble(ctxT(t), AssembleParams{OutputPath: out, Channels: 2, Samples: SamplesFor(5000, 48000),
		Clips: []Clip{{Path: fitted, Offset: SamplesFor(startMs, 48000)}}}))
	mix, err := ReadWAVFile(out)
	require.NoError(t, err)
	require.Equal(t, 2, mix.Channels)
	require.Equal(t, 5000*48, mix.Frames())
	off := int(SamplesFor(startMs, 48000))
	for i := range mix.Frames() {
		var want int16
		if i >= off && i < off+int(res.Samples) {
			want = clip.Samples[i-off]
		}
		require.Equal(t, want, mix.Samples[2*i], "left, frame %d", i)
		require.Equal(t, want, mix.Samples[2*i+1], "right, frame %d", i)
	}
}

func TestAssembleIsReproducibleAndStemsSumToTheMix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	const total = 10 * 48000
	stems := map[string][]Clip{}
	var all []Clip
	for c, who := range []string{"ann", "bob", "cy"} {
		for k := range 6 {
			n := 2000 + rng.IntN(40000)
			amp := float64(2000 + 1000*c)
			freq := 100 + 50*float64(k+c)
			p := writeClip(t, dir, who+string(rune('a'+k))+".wav", n, func(i int) int16 {
				return int16(amp * math.Sin(2*math.Pi*freq*float64(i)/48000))
			})
			clip := Clip{Path: p, Offset: int64(rng.IntN(total)) - 1000} // some start before 0
			stems[who] = append(stems[who], clip)
			all = append(all, clip)
		}
	}
	mixPath := filepath.Join(dir, "mix.wav")
	require.NoError(t, assemble(ctxT(t), AssembleParams{OutputPath: mixPath, Samples: total, Clips: all}))

	// Byte-identical across runs, and independent of the order clips are given in.
	again := filepath.Join(dir, "again.wav")
	shuffled := append([]Clip(nil), all...)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	require.NoError(t, assemble(ctxT(t), AssembleParams{OutputPath: again, Samples: total, Clips: shuffled}))
	require.Equal(t, fileSum(t, mixPath), fileSum(t, again))

	mix, err := ReadWAVFile(mixPath)
	require.NoError(t, err)
	sum := make([]int32, total)
	for who, clips := range stems {
		p := filepath.Join(dir, "stem-"+who+".wav")
		require.NoError(t, assemble(ctxT(t), AssembleParams{OutputPath: p, Samples: total, Clips: clips}))
		stem, err := ReadWAVFile(p)
		require.NoError(t, err)
		require.Equal(t, total, stem.Frames())
		for i, s := range stem.Samples {
			sum[i] += int32(s)
		}
	}
	var nonZero int
	for i, s := range mix.Samples {
		require.Equal(t, sum[i], int32(s), "sample %d", i)
		if s != 0 {
			nonZero++
		}
	}
	require.Greater(t, nonZero, total/4)
}

func fileSum(t *testing.T, p string) [32]byte {
	t.Helper()
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	return sha256.Sum256(data)
}

func TestAssembleClips(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	loud := writeClip(t, dir, "loud.wav", 100, func(int) int16 { return 30000 })
	quiet := writeClip(t, dir, "quiet.wav", 100, func(int) int16 { return -30000 })
	out := filepath.Join(dir, "out.wav")
	require.NoError(t, assemble(ctxT(t), AssembleParams{OutputPath: out, Samples: 300, Clips: []Clip{
		{Path: loud, Offset: 0}, {Path: loud, Offset: 50}, {Path: quiet, Offset: 200}, {Path: quiet, Offset: 200},
	}}))
	mix, err := ReadWAVFile(out)
	require.NoError(t, err)
	require.Equal(t, int16(30000), mix.Samples[10])
	require.Equal(t, int16(math.MaxInt16), mix.Samples[60])
	require.Equal(t, int16(30000), mix.Samples[120])
	require.Zero(t, mix.Samples[170])
	require.Equal(t, int16(math.MinInt16), mix.Samples[250])
}

func TestAssembleErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out.wav")
	at44 := filepath.Join(dir, "44.wav")
	require.NoError(t, WriteWAVFile(at44, PCM{SampleRate: 44100, Channels: 1, Samples: make([]int16, 10)}))
	_, err := Assemble(ctxT(t), AssembleParams{OutputPath: out, Samples: 100, Clips: []Clip{{Path: at44}}})
	require.ErrorIs(t, err, ErrInvalid)
	require.NoFileExists(t, out)

	_, err = Assemble(ctxT(t), AssembleParams{OutputPath: out, Samples: 100, Channels: 6})
	require.ErrorIs(t, err, ErrInvalid)

	_, err = Assemble(ctxT(t), AssembleParams{OutputPath: out, Samples: 100, Clips: []Clip{{Path: filepath.Join(dir, "missing.wav")}}})
	require.ErrorIs(t, err, os.ErrNotExist)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing half-written is left")

	// Empty programme: a valid WAV with no samples.
	require.NoError(t, assemble(ctxT(t), AssembleParams{OutputPath: out}))
	empty, err := ReadWAVFile(out)
	require.NoError(t, err)
	require.Zero(t, empty.Frames())
}

func TestWAVRoundTrip(t *testing.T) {
	t.Parallel()
	p := PCM{SampleRate: 48000, Channels: 2, Samples: []int16{0, 1, -1, math.MaxInt16, math.MinInt16, 12345}}
	var buf bytes.Buffer
	require.NoError(t, WriteWAV(&buf, p))
	require.Equal(t, 44+12, buf.Len())
	got, err := ReadWAV(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	require.Equal(t, p, got)
	require.Equal(t, 3, got.Frames())

	require.ErrorIs(t, WriteWAV(&buf, PCM{SampleRate: 48000, Channels: 2, Samples: []int16{1}}), ErrInvalid)
}

func TestReadWAVFromOtherWriters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// ffmpeg adds a LIST chunk; written to a pipe, it cannot fill in the sizes.
	withList := filepath.Join(dir, "list.wav")
	ffmpegGen(t, "-f", "lavfi", "-i", "sine=sample_rate=16000:duration=0.5", "-ac", "2", withList)
	streamed := filepath.Join(dir, "streamed.wav")
	f, err := os.Create(streamed)
	require.NoError(t, err)
	c := exec.Command("ffmpeg", "-v", "error", "-f", "lavfi", "-i", "sine=sample_rate=16000:duration=0.5", "-f", "wav", "pipe:1")
	c.Stdout = f
	require.NoError(t, c.Run())
	require.NoError(t, f.Close())
	for _, p := range []string{withList, streamed} {
		pcm, err := ReadWAVFile(p)
		require.NoError(t, err, p)
		require.Equal(t, 16000, pcm.SampleRate)
		require.Equal(t, 8000, pcm.Frames(), p)
	}

	float := filepath.Join(dir, "float.wav")
	ffmpegGen(t, "-f", "lavfi", "-i", "sine=duration=0.1", "-c:a", "pcm_f32le", float)
	_, err = ReadWAVFile(float)
	require.ErrorIs(t, err, ErrInvalid)

	sox24 := filepath.Join(dir, "sox24.wav")
	cmd(t, "sox", "-n", "-b", "24", "-r", "48000", sox24, "synth", "0.1", "sine", "300")
	_, err = ReadWAVFile(sox24)
	require.ErrorIs(t, err, ErrInvalid)

	text := filepath.Join(dir, "text.wav")
	require.NoError(t, os.WriteFile(text, []byte("hello"), 0o644))
	_, err = ReadWAVFile(text)
	require.ErrorIs(t, err, ErrNotAudio)
}

// TestAssembleCountsClippedSamples: two loud takes that overlap in phase clip where they do
// (mono, and a mono take into both channels of a stereo mix: a sample a channel),
// and the count says how many; the same takes apart clip nothing.
func TestAssembleCountsClippedSamples(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	loud := writeClip(t, dir, "loud.wav", 1000, func(i int) int16 { return int16(20000 * math.Sin(float64(i)/10)) })
	out := filepath.Join(dir, "mix.wav")
	for _, tc := range []struct {
		name     string
		channels int
		second   int64
	}{{"overlapping", 1, 314}, {"overlapping in stereo", 2, 314}, {"apart", 1, 1000}} {
		res, err := Assemble(ctxT(t), AssembleParams{OutputPath: out, Channels: tc.channels, Samples: 2000,
			Clips: []Clip{{Path: loud}, {Path: loud, Offset: tc.second}}})
		require.NoError(t, err, tc.name)
		mix, err := ReadWAVFile(out)
		require.NoError(t, err)
		var atFullScale int64
		for _, v := range mix.Samples {
			if v == math.MaxInt16 || v == math.MinInt16 {
				atFullScale++
			}
		}
		t.Logf("%s: %d clipped samples", tc.name, res.ClippedSamples)
		require.Equal(t, atFullScale, res.ClippedSamples, tc.name) // neither take reaches full scale alone
		if tc.second < 1000 {
			require.Positive(t, res.ClippedSamples, tc.name)
		}
	}
}

// assemble is Assemble for a test that checks the file alone.
func assemble(ctx context.Context, p AssembleParams) error {
	_, err := Assemble(ctx, p)
	return err
}
