package audio

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/i18n"
)

const (
	threeSeconds = "The quick brown fox jumps over the lazy dog near the river bank."
	fiveSeconds  = "The quick brown fox jumps over the lazy dog, and then it runs far away across the green fields to its den."
)

func TestPlanFit(t *testing.T) {
	t.Parallel()
	base := func(mod func(p *FitParams)) FitParams {
		p := FitParams{InputPath: "in.wav", OutputPath: "out.wav", SlotMs: 2000}
		if mod != nil {
			mod(&p)
		}
		p, err := p.withDefaults()
		require.NoError(t, err)
		return p
	}
	tests := []struct {
		name      string
		speechMs  float64
		p         FitParams
		needed    float64
		ratio     float64
		maxBorrow int
		review    bool
	}{
		{"fits: pad only", 1500, base(nil), 0.75, 1, 0, false},
		{"fits: slow down when asked", 1800, base(func(p *FitParams) { p.SlowDown = true }), 0.9, 0.9, 0, false},
		{"slow down stops at the limit", 1000, base(func(p *FitParams) { p.SlowDown = true }), 0.5, 0.85, 0, false},
		{"borrow instead of stretch", 2200, base(func(p *FitParams) { p.GapMs = 1000 }), 1, 1, 300, false},
		{"borrow limited by the gap", 2200, base(func(p *FitParams) { p.GapMs = 100 }), 2200.0 / 2100, 2200.0 / 2100, 100, false},
		{"borrowing off", 2200, base(func(p *FitParams) { p.GapMs = 1000; p.GapBorrowMs = -1 }), 1.1, 1.1, 0, false},
		{"stretch within limits", 2400, base(nil), 1.2, 1.2, 0, false},
		{"too long", 5000, base(func(p *FitParams) { p.GapMs = 300 }), 5000.0 / 2300, 1.25, 300, true},
		{"too long for custom limit", 2400, base(func(p *FitParams) { p.StretchMax = 1.1 }), 1.2, 1.1, 0, true},
		{"smoothing speeds up towards the previous line", 1500, base(func(p *FitParams) { p.PrevRatio = 1.25 }), 0.75, 1.1, 0, false},
		{"smoothing cannot slow down what must be fast", 2400, base(func(p *FitParams) { p.PrevRatio = 1 }), 1.2, 1.2, 0, false},
		{"smoothing within the step changes nothing", 2200, base(func(p *FitParams) { p.PrevRatio = 1.2 }), 1.1, 1.1, 0, false},
		{"smoothing off", 1500, base(func(p *FitParams) { p.PrevRatio = 1.25; p.MaxSpeedStep = -1 }), 0.75, 1, 0, false},
		{"smoothing does not slow down unasked", 1500, base(func(p *FitParams) { p.PrevRatio = 0.85; p.MaxSpeedStep = 0.05 }), 0.75, 1, 0, false},
		{"smoothing slows down when allowed", 1500, base(func(p *FitParams) { p.PrevRatio = 0.85; p.SlowDown = true; p.MaxSpeedStep = 0.05 }), 0.75, 0.85, 0, false},
		{"silence", 0, base(nil), 0, 1, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plan := planFit(tc.speechMs, tc.p)
			require.InDelta(t, tc.needed, plan.Needed, 1e-9)
			require.InDelta(t, tc.ratio, plan.Ratio, 1e-9)
			require.Equal(t, tc.maxBorrow, plan.MaxBorrowMs)
			require.Equal(t, tc.review, plan.Review)
		})
	}
}

// fitBundle holds a speech take and its measured length after trimming.
type fitBundle struct {
	dir      string
	take     string
	speechMs int
}

func setupFit(t *testing.T, text string) fitBundle {
	t.Helper()
	dir := t.TempDir()
	take := speech(t, dir, "take.wav", text)
	pcm, err := ReadWAVFile(take)
	require.NoError(t, err)
	x := downmix(pcm)
	s, e := trimSilence(x, pcm.SampleRate, DefaultSilenceThreshold)
	return fitBundle{dir: dir, take: take, speechMs: int(math.Round(float64(e-s) * 1000 / float64(pcm.SampleRate)))}
}

// requireFitted checks the written file against the result.
func requireFitted(t *testing.T, res FitResult) PCM {
	t.Helper()
	out, err := ReadWAVFile(res.OutputPath)
	require.NoError(t, err)
	require.Equal(t, 1, out.Channels)
	require.Equal(t, res.SampleRate, out.SampleRate)
	require.Equal(t, res.Samples, int64(out.Frames()))
	b, err := os.ReadFile(res.OutputPath)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	require.Equal(t, hex.EncodeToString(sum[:]), res.SHA256)
	require.Equal(t, int64(len(b)), res.Bytes)
	// The loudness reported (measured before quantising, plus the gain) is what the
	// output measures.
	if l, ok := integratedLoudness(downmix(out), out.SampleRate); ok {
		require.InDelta(t, l, res.LoudnessLUFS, 0.01)
	} else {
		require.Equal(t, SilenceLUFS, res.LoudnessLUFS)
	}
	// Nothing but the output is left in its directory.
	entries, err := os.ReadDir(filepath.Dir(res.OutputPath))
	require.NoError(t, err)
	for _, e := range entries {
		require.NotRegexp(t, `\.tmp$`, e.Name())
	}
	return out
}

var ebur128I = regexp.MustCompile(`I:\s+(-?[0-9.]+) LUFS`)

// ffmpegLoudness measures path with ffmpeg's ebur128 filter, independent of ours.
func ffmpegLoudness(t *testing.T, path string) float64 {
	t.Helper()
	out, err := exec.Command("ffmpeg", "-nostdin", "-hide_banner", "-nostats", "-i", path,
		"-af", "ebur128=framelog=verbose", "-f", "null", "-").CombinedOutput()
	require.NoError(t, err, string(out))
	m := ebur128I.FindAllStringSubmatch(string(out), -1)
	require.NotEmpty(t, m, string(out))
	v, err := strconv.ParseFloat(m[len(m)-1][1], 64)
	require.NoError(t, err)
	return v
}

func TestFitSpeechIntoSlots(t *testing.T) {
	t.Parallel()
	b := setupFit(t, threeSeconds)
	tests := []struct {
		name        string
		slotMs      int
		gapMs       int
		sampleRate  int
		wantRatio   float64 // 0: 1 within limits, checked separately
		wantBorrow  bool
		forceAtempo bool
	}{
		{name: "longer slot: pad", slotMs: b.speechMs + 700, wantRatio: 1},
		{name: "odd slot length", slotMs: b.speechMs + 333, wantRatio: 1},
		{name: "slightly short slot: stretch", slotMs: b.speechMs * 100 / 115, wantRatio: 1.15},
		{name: "stretch at 44.1 kHz", slotMs: b.speechMs * 100 / 110, sampleRate: 44100, wantRatio: 1.10},
		{name: "stretch with atempo", slotMs: b.speechMs * 100 / 120, wantRatio: 1.2, forceAtempo: true},
		{name: "borrow from the gap", slotMs: b.speechMs - 200, gapMs: 1000, wantRatio: 1, wantBorrow: true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "fit.wav")
			res, err := Fit(ctxT(t), FitParams{
				InputPath: b.take, OutputPath: out, SlotMs: tc.slotMs, GapMs: tc.gapMs,
				SampleRate: tc.sampleRate, forceAtempo: tc.forceAtempo,
			})
			require.NoError(t, err, "case %d", i)
			rate := tc.sampleRate
			if rate == 0 {
				rate = DefaultSampleRate
			}
			require.Equal(t, rate, res.SampleRate)
			require.Equal(t, int64(tc.slotMs+res.BorrowedMs)*int64(rate)/1000, res.Samples)
			requireFitted(t, res)
			require.False(t, res.NeedsReview)
			require.Empty(t, res.Hint.Key)
			require.InDelta(t, b.speechMs, res.SpeechMs, 1)
			require.InDelta(t, tc.wantRatio, res.Ratio, 0.01)
			require.GreaterOrEqual(t, res.Ratio, DefaultStretchMin)
			require.LessOrEqual(t, res.Ratio, DefaultStretchMax)
			if tc.wantBorrow {
				require.Positive(t, res.BorrowedMs)
				require.LessOrEqual(t, res.BorrowedMs, DefaultGapBorrowMs)
				require.InDelta(t, 200, res.BorrowedMs, 2)
			} else {
				require.Zero(t, res.BorrowedMs)
			}
			require.InDelta(t, DefaultLoudness, res.LoudnessLUFS, 0.5)
			require.InDelta(t, DefaultLoudness, ffmpegLoudness(t, out), 1)
		})
	}
}

func TestFitTooLongNeedsReview(t *testing.T) {
	t.Parallel()
	b := setupFit(t, fiveSeconds)
	require.Greater(t, b.speechMs, 4500, "the sentence should take about 5 s")
	out := filepath.Join(b.dir, "fit.wav")
	res, err := Fit(ctxT(t), FitParams{InputPath: b.take, OutputPath: out, SlotMs: 2000, GapMs: 150})
	require.NoError(t, err)
	requireFitted(t, res)
	require.True(t, res.NeedsReview)
	require.Equal(t, DefaultStretchMax, res.Ratio, "never stretched past the limit")
	require.InDelta(t, float64(b.speechMs)/2150, res.NeededRatio, 0.01)
	require.Equal(t, 150, res.BorrowedMs, "the whole gap is used")
	require.Equal(t, int64(2150*48), res.Samples)
	require.Equal(t, "audio.fit.too_long", res.Hint.Key)
	pct := int(math.Round((res.NeededRatio/DefaultStretchMax - 1) * 100))
	require.Equal(t, []any{pct}, res.Hint.Args)
	require.Contains(t, res.Hint.In(i18n.EN), "About "+strconv.Itoa(pct)+"% too long")
	require.Contains(t, res.Hint.In(i18n.ZH), strconv.Itoa(pct)+"%")
}

func TestFitSilence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "silent.wav")
	ffmpegGen(t, "-f", "lavfi", "-i", "anullsrc=r=24000:cl=mono", "-t", "2", in)
	res, err := Fit(ctxT(t), FitParams{InputPath: in, OutputPath: filepath.Join(dir, "out.wav"), SlotMs: 1500})
	require.NoError(t, err)
	out := requireFitted(t, res)
	require.Equal(t, int64(72000), res.Samples)
	require.Zero(t, res.SpeechMs)
	require.Equal(t, 1.0, res.Ratio)
	require.Equal(t, SilenceLUFS, res.LoudnessLUFS)
	require.Zero(t, res.GainDB)
	require.True(t, res.NeedsReview)
	require.Equal(t, "audio.fit.silent", res.Hint.Key)
	for _, s := range out.Samples {
		require.Zero(t, s)
	}
}

func TestFitTrimsAndNormalisesATone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// 0.4 s of silence, 1 s of a quiet tone (-30 dBFS), 0.6 s of silence, stereo MP3:
	// decoded by ffmpeg rather than read directly.
	in := filepath.Join(dir, "tone.mp3")
	ffmpegGen(t, "-f", "lavfi", "-i", "sine=frequency=500:sample_rate=44100:duration=1",
		"-af", "volume=-27dB,adelay=400:all=1,apad=pad_dur=0.6", "-ac", "2", in)
	res, err := Fit(ctxT(t), FitParams{InputPath: in, OutputPath: filepath.Join(dir, "out.wav"), SlotMs: 1200})
	require.NoError(t, err)
	requireFitted(t, res)
	require.InDelta(t, 1000, res.SpeechMs, 40) // MP3 smears the edges a little
	require.Equal(t, 1.0, res.Ratio)
	require.Equal(t, int64(1200*48), res.Samples)
	require.InDelta(t, DefaultLoudness, res.LoudnessLUFS, 0.2)
	require.Greater(t, res.GainDB, 0.0)
}

func TestFitKeepsPeaksUnderTheCeiling(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "loud.wav")
	// A quiet tone with one loud click: reaching -23 LUFS would clip the click, so the
	// gain stops at the ceiling.
	ffmpegGen(t, "-f", "lavfi", "-i", "aevalsrc='0.05*sin(2*PI*200*t)+0.8*lt(abs(t-0.5),0.0005)':s=48000:d=1",
		"-c:a", "pcm_s16le", in)
	res, err := Fit(ctxT(t), FitParams{InputPath: in, OutputPath: filepath.Join(dir, "out.wav"), SlotMs: 1000})
	require.NoError(t, err)
	out := requireFitted(t, res)
	var pk int16
	for _, s := range out.Samples {
		pk = max(pk, s, -s)
	}
	require.LessOrEqual(t, float64(pk)/32768, math.Pow(10, peakCeiling/20)+1e-4)
	require.Less(t, res.LoudnessLUFS, DefaultLoudness-3)
}

func TestFitErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	take := tone(t, dir, "t.wav", "1", "24000")
	out := filepath.Join(dir, "out.wav")

	_, err := Fit(ctxT(t), FitParams{InputPath: take, OutputPath: out})
	require.ErrorIs(t, err, ErrInvalid, "no slot")
	_, err = Fit(ctxT(t), FitParams{InputPath: take, OutputPath: out, SlotMs: 1000, StretchMin: 1.1})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = Fit(ctxT(t), FitParams{InputPath: "-x.wav", OutputPath: out, SlotMs: 1000})
	require.ErrorIs(t, err, ErrInvalid)

	text := filepath.Join(dir, "text.wav")
	require.NoError(t, os.WriteFile(text, []byte("not audio"), 0o644))
	_, err = Fit(ctxT(t), FitParams{InputPath: text, OutputPath: out, SlotMs: 1000})
	require.ErrorIs(t, err, ErrNotAudio)

	// A header no recorder writes (7 Hz, or 2 MHz) is refused before ffmpeg sees it.
	for _, rate := range []int{7, 2_000_000} {
		b, release, err := encodeMonoWAV(make([]float32, 4000), 1, rate)
		require.NoError(t, err)
		odd := filepath.Join(dir, fmt.Sprintf("rate%d.wav", rate))
		require.NoError(t, os.WriteFile(odd, b, 0o644))
		release()
		_, err = Fit(ctxT(t), FitParams{InputPath: odd, OutputPath: out, SlotMs: 1000})
		require.ErrorIs(t, err, ErrNotAudio, "%d Hz", rate)
		require.NoFileExists(t, out)
	}

	_, err = Fit(ctxT(t), FitParams{InputPath: take, OutputPath: filepath.Join(dir, "no", "such", "dir.wav"), SlotMs: 1000})
	require.Error(t, err)
	require.NoFileExists(t, out)

	_, err = Fit(ctxT(t), FitParams{InputPath: take, OutputPath: out, SlotMs: 1000,
		OutputFor: func(string) (string, error) { return out, nil }})
	require.ErrorIs(t, err, ErrInvalid, "two outputs")
	refused := errors.New("refused")
	_, err = Fit(ctxT(t), FitParams{InputPath: take, SlotMs: 1000,
		OutputFor: func(string) (string, error) { return "", refused }})
	require.ErrorIs(t, err, refused)
	require.NoFileExists(t, out)
}

// TestFitNamesItsOutputByContent writes a take where OutputFor says, given the
// SHA-256 of the bytes it writes.
func TestFitNamesItsOutputByContent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	take := tone(t, dir, "t.wav", "1", "24000")
	var asked string
	res, err := Fit(ctxT(t), FitParams{InputPath: take, SlotMs: 1000, OutputFor: func(sum string) (string, error) {
		asked = sum
		return filepath.Join(dir, sum+".wav"), nil
	}})
	require.NoError(t, err)
	require.Equal(t, res.SHA256, asked)
	require.Equal(t, filepath.Join(dir, res.SHA256+".wav"), res.OutputPath)
	b, err := os.ReadFile(res.OutputPath)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	require.Equal(t, res.SHA256, hex.EncodeToString(sum[:]))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2, "the take and its output, no temporary file left")
}

func TestWriteFileAtomicLeavesNothingOnFullDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "take.wav")
	require.NoError(t, os.WriteFile(path, []byte("previous take"), 0o644))
	err := writeFileAtomic(path, func(w io.Writer) error {
		if _, err := w.Write(make([]byte, 1<<20)); err != nil {
			return err
		}
		return &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
	})
	require.ErrorIs(t, err, ErrNoSpace)
	var ue *i18n.Error
	require.ErrorAs(t, err, &ue)
	require.Equal(t, "audio.no_space", ue.Key)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the temporary file is removed")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "previous take", string(data), "the previous file is untouched")
}

// TestWriteToDevFull writes through the real kernel error where /dev/full exists.
func TestWriteToDevFull(t *testing.T) {
	t.Parallel()
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full")
	}
	defer f.Close()
	err = WriteWAV(f, PCM{SampleRate: 48000, Channels: 1, Samples: make([]int16, 48000)})
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.ErrorIs(t, writeError("/dev/full", err, ""), ErrNoSpace)
}

func TestLoudnessMatchesFFmpeg(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	take := speech(t, dir, "s.wav", threeSeconds)
	at48 := filepath.Join(dir, "s48.wav")
	ffmpegGen(t, "-i", take, "-ar", "48000", "-c:a", "pcm_s16le", at48)
	for _, p := range []string{take, at48} {
		pcm, err := ReadWAVFile(p)
		require.NoError(t, err)
		l, ok := integratedLoudness(downmix(pcm), pcm.SampleRate)
		require.True(t, ok)
		require.InDelta(t, ffmpegLoudness(t, p), l, 0.15, p)
	}
}

func TestAtempoChain(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"atempo=1.200000"}, atempoChain(1.2))
	require.Equal(t, []string{"atempo=2", "atempo=1.500000"}, atempoChain(3))
	require.Equal(t, []string{"atempo=0.5", "atempo=0.800000"}, atempoChain(0.4))
}

func BenchmarkFit(b *testing.B) {
	dir := b.TempDir()
	take := speech(b, dir, "take.wav", threeSeconds)
	pcm, err := ReadWAVFile(take)
	require.NoError(b, err)
	lineSeconds := pcm.Duration().Seconds()
	for _, bc := range []struct {
		name string
		slot float64 // × the line's length
	}{{"pad", 1.2}, {"stretch", 0.85}} {
		b.Run(bc.name, func(b *testing.B) {
			p := FitParams{InputPath: take, OutputPath: filepath.Join(dir, "out.wav"), SlotMs: int(lineSeconds * 1000 * bc.slot)}
			for b.Loop() {
				if _, err := Fit(b.Context(), p); err != nil {
					b.Fatal(err)
				}
			}
			perOp := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(perOp/lineSeconds, "overhead")
		})
	}
}

func TestFitStretchKeepsPitch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := tone(t, dir, "a440.wav", "2", "48000")
	for _, atempo := range []bool{false, true} {
		t.Run("atempo="+strconv.FormatBool(atempo), func(t *testing.T) {
			t.Parallel()
			res, err := Fit(ctxT(t), FitParams{InputPath: in, OutputPath: filepath.Join(t.TempDir(), "out.wav"),
				SlotMs: 1700, forceAtempo: atempo})
			require.NoError(t, err)
			out := requireFitted(t, res)
			require.InDelta(t, 2000.0/1700, res.Ratio, 0.01)
			// Count zero crossings in the middle second: 440 Hz has 880 a second.
			mid := out.Samples[len(out.Samples)/2-24000 : len(out.Samples)/2+24000]
			var crossings int
			for i := 1; i < len(mid); i++ {
				if (mid[i-1] < 0) != (mid[i] < 0) {
					crossings++
				}
			}
			require.InDelta(t, 880, crossings, 10)
		})
	}
}

func TestHintSurvivesJSON(t *testing.T) {
	t.Parallel()
	h := Hint{Key: "audio.fit.too_long", Args: []any{18}}
	data, err := json.Marshal(h)
	require.NoError(t, err)
	require.JSONEq(t, `{"key":"audio.fit.too_long","args":[18]}`, string(data))
	var back Hint
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, h.In(i18n.EN), back.In(i18n.EN))
	require.Contains(t, back.In(i18n.EN), "About 18% too long")
	require.Empty(t, Hint{}.In(i18n.EN))
}

func TestPeakIsTheLargestMagnitude(t *testing.T) {
	require.Equal(t, 0.0, peak(nil))
	require.Equal(t, 0.0, peak([]float32{0, float32(math.Copysign(0, -1))}))
	require.Equal(t, float64(float32(0.75)), peak([]float32{0.1, -0.75, 0.5, 0}))
	require.Equal(t, float64(float32(0.8)), peak([]float32{-0.25, 0.8, -0.79}))
	require.Equal(t, 1.0, peak([]float32{-1, 0.999}))
}

// TestQuantiseRoundsAsMathRound checks quantise against rounding with math.Round on
// the values where they could differ: every sample value's half-way point and its
// float32 neighbours, the clipping bounds, tiny values, and a spread of all float32
// bit patterns of either sign up to twice full scale.
func TestQuantiseRoundsAsMathRound(t *testing.T) {
	want := func(v float32) int16 {
		f := float64(v) * 32768
		switch {
		case f >= math.MaxInt16:
			return math.MaxInt16
		case f <= math.MinInt16:
			return math.MinInt16
		}
		return int16(math.Round(f))
	}
	check := func(v float32) {
		if got, w := quantise(v), want(v); got != w {
			t.Fatalf("quantise(%g) = %d, want %d", v, got, w)
		}
	}
	for k := -32769; k <= 32768; k++ {
		for _, h := range []float64{0, 0.5} {
			v := float32((float64(k) + h) / 32768)
			check(v)
			check(math.Nextafter32(v, float32(math.Inf(1))))
			check(math.Nextafter32(v, float32(math.Inf(-1))))
		}
	}
	for _, v := range []float32{0, float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
		1e-20, -1e-20, 1, -1, 2, -2, math.MaxFloat32, -math.MaxFloat32} {
		check(v)
	}
	limit := math.Float32bits(2)
	for b := uint32(0); b < limit; b += 997 {
		check(math.Float32frombits(b))
		check(-math.Float32frombits(b))
	}
}

// TestFitRefusesASlotPastTheCap: a three-hour slot (a valid SRT cue) used to be padded
// in memory, 2 GB of samples; it is refused before the take is even decoded, so the
// fit allocates next to nothing. The test is not parallel so that nothing else
// allocates while it measures.
func TestFitRefusesASlotPastTheCap(t *testing.T) {
	dir := t.TempDir()
	take := tone(t, dir, "t.wav", "1", "24000")
	out := filepath.Join(dir, "out.wav")

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Fit(ctxT(t), FitParams{InputPath: take, OutputPath: out, SlotMs: 3 * 3600_000})
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, ErrInvalid)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "refused without padding the slot")
	require.NoFileExists(t, out)

	_, err = Fit(ctxT(t), FitParams{InputPath: take, OutputPath: out, SlotMs: 2001, MaxSlotMs: 2000})
	require.ErrorIs(t, err, ErrInvalid, "one millisecond past a set cap")
	res, err := Fit(ctxT(t), FitParams{InputPath: take, OutputPath: out, SlotMs: 2000, MaxSlotMs: 2000})
	require.NoError(t, err, "a slot at the cap fits")
	require.Equal(t, SamplesFor(2000, DefaultSampleRate), res.Samples)
}

// TestFitFadesSpeechItCuts fits a steady tone twice the slot's length: the part cut
// off is reported, and the end fades out over the last 30 ms instead of stopping at
// full level (which sounds like a word bitten off).
func TestFitFadesSpeechItCuts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := tone(t, dir, "long.wav", "4", "48000")
	res, err := Fit(ctxT(t), FitParams{InputPath: in, OutputPath: filepath.Join(dir, "out.wav"), SlotMs: 2000, forceAtempo: true})
	require.NoError(t, err)
	out := requireFitted(t, res)
	require.True(t, res.NeedsReview)
	require.Equal(t, int64(96000), res.Samples)
	// 4 s at 1.25 is 3.2 s: 1.2 s past the 2 s slot is cut.
	require.InDelta(t, 1200, res.CutMs, 20)
	peakIn := func(fromMs, toMs int) float64 {
		var pk int16
		n := len(out.Samples)
		for _, s := range out.Samples[n-toMs*48 : n-fromMs*48] {
			pk = max(pk, s, -s)
		}
		return float64(pk)
	}
	steady := peakIn(100, 200)
	require.Greater(t, steady, 1000.0)
	require.InDelta(t, steady, peakIn(30, 40), steady*0.02, "the fade starts 30 ms before the end")
	require.Less(t, peakIn(10, 15), steady*0.6, "10-15 ms before the end it is half faded")
	require.Less(t, peakIn(0, 3), steady*0.15, "and it ends near silence")
}

// TestFitDoesNotClickWhereTheTakeStartsOrEndsLoud fits takes whose file starts and
// ends mid-waveform at full level (a generation cut off by its token cap, a take
// without leading silence): the silence around the speech in the slot must not
// meet it with a step, which is a click. Each output is checked for its largest
// sample-to-sample step, the silence before its first sample included, against the
// tone's own largest step.
func TestFitDoesNotClickWhereTheTakeStartsOrEndsLoud(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		rate   int
		slotMs int
		gapMs  int
	}{
		{name: "padded", rate: 22050, slotMs: 1500},
		{name: "padded at 48 kHz", rate: 48000, slotMs: 1500},
		{name: "borrowed", rate: 24000, slotMs: 950, gapMs: 1000},
		{name: "stretched", rate: 24000, slotMs: 800, gapMs: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A directory of its own: requireFitted checks that nothing but the output
			// is left beside it, which a parallel case's temporary file would break.
			dir := t.TempDir()
			// One second of a 440 Hz cosine starting at its peak and ending at a quarter
			// period (a peak too), with no silence at either end.
			n := tc.rate + tc.rate/(4*440)
			s := make([]int16, n)
			for i := range s {
				s[i] = int16(math.Round(16000 * math.Cos(2*math.Pi*440*float64(i)/float64(tc.rate))))
			}
			in := filepath.Join(dir, strconv.Itoa(tc.rate)+"-"+strconv.Itoa(tc.slotMs)+".wav")
			require.NoError(t, WriteWAVFile(in, PCM{SampleRate: tc.rate, Channels: 1, Samples: s}))
			res, err := Fit(ctxT(t), FitParams{InputPath: in, OutputPath: in + ".fit.wav", SlotMs: tc.slotMs, GapMs: tc.gapMs})
			require.NoError(t, err)
			out := requireFitted(t, res)
			var pk, step float64
			prev := 0.0 // the silence before the take
			for _, v := range out.Samples {
				pk = max(pk, math.Abs(float64(v)))
				step = max(step, math.Abs(float64(v)-prev))
				prev = float64(v)
			}
			step = max(step, math.Abs(prev)) // and the silence after it
			require.Greater(t, pk, 1000.0)
			// A 440 Hz sine at 48 kHz moves at most 2π·440/48000 ≈ 0.058 of its peak a
			// sample; twice that leaves room for the stretch, a step is near 1.
			require.Less(t, step/pk, 0.12, "a step of %.0f at a peak of %.0f", step, pk)
		})
	}
}

// TestFitStretchesAVeryShortTake: a take of a few tens of milliseconds (a cough, a
// breath) made ffmpeg's stretchers fail; it is stretched like any other, with
// Rubber Band and with atempo.
func TestFitStretchesAVeryShortTake(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := tone(t, dir, "short.wav", "0.02", "24000")
	for _, atempo := range []bool{false, true} {
		res, err := Fit(ctxT(t), FitParams{InputPath: in, OutputPath: filepath.Join(dir, fmt.Sprintf("out-%v.wav", atempo)),
			SlotMs: 10, forceAtempo: atempo})
		require.NoError(t, err, "atempo %v", atempo)
		out := requireFitted(t, res)
		require.Equal(t, DefaultStretchMax, res.Ratio)
		require.True(t, res.NeedsReview, "still too long for its slot")
		require.Equal(t, int64(10*48), res.Samples)
		loud := 0
		for _, s := range out.Samples {
			if math.Abs(float64(s)) > 1000 {
				loud++
			}
		}
		require.Greater(t, loud, 100, "the tone is there (atempo %v)", atempo)
	}
}
