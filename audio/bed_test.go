package audio

import (
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// bedTone writes seconds of a sine at freq Hz and amplitude amp (of full scale), with
// channels, at 48 kHz, to dir/name.
func bedTone(t testing.TB, dir, name string, freq int, amp float64, seconds float64, channels int) string {
	t.Helper()
	p := filepath.Join(dir, name)
	ffmpegGen(t, "-f", "lavfi", "-i", "aevalsrc="+strconv.FormatFloat(amp, 'f', 4, 64)+"*sin("+strconv.Itoa(freq)+"*2*PI*t):s=48000:d="+
		strconv.FormatFloat(seconds, 'f', 3, 64), "-ac", strconv.Itoa(channels), p)
	return p
}

// toneLevel is the amplitude of the freq Hz component of channel 0 of p between
// frames [from, to) (Goertzel): the bed's level, whatever else sounds.
func toneLevel(p PCM, freq float64, from, to int) float64 {
	w := 2 * math.Pi * freq / float64(p.SampleRate)
	c := 2 * math.Cos(w)
	var s1, s2 float64
	for i := from; i < to; i++ {
		s := float64(p.Samples[i*p.Channels])/32768 + c*s1 - s2
		s2, s1 = s1, s
	}
	power := s1*s1 + s2*s2 - c*s1*s2
	return 2 * math.Sqrt(max(power, 0)) / float64(to-from)
}

// integratedLUFS measures a file with ffmpeg's ebur128 filter (EBU R128).
func integratedLUFS(t testing.TB, path string) float64 {
	t.Helper()
	out, err := exec.Command("ffmpeg", "-hide_banner", "-nostdin", "-i", path, "-af", "ebur128", "-f", "null", "-").CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := regexp.MustCompile(`(?s)Summary:.*?I:\s+(-?[0-9.]+) LUFS`).FindSubmatch(out)
	require.NotNil(t, m, "%s", out)
	v, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	return v
}

// TestRenderBedTrimsAndPads renders a stereo bed shorter and one longer than the
// programme: both are exactly the programme's length in the stems' format, the
// short one silent after its end.
func TestRenderBedTrimsAndPads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	short := bedTone(t, dir, "short.wav", 15000, 0.3, 2, 2)
	long := bedTone(t, dir, "long.flac", 15000, 0.3, 9, 2)
	ref := int64(172_800_000)
	const n = 5 * 48000
	out := filepath.Join(dir, "short-bed.wav")
	require.NoError(t, RenderBed(ctxT(t), BedParams{InputPath: short, OutputPath: out, Channels: 1, BitDepth: 24, TimeReference: &ref, Samples: n}))
	info, err := Probe(ctxT(t), out)
	require.NoError(t, err)
	require.Equal(t, 1, info.Channels)
	require.Equal(t, 48000, info.SampleRate)
	out16 := filepath.Join(dir, "short16.wav")
	require.NoError(t, RenderBed(ctxT(t), BedParams{InputPath: short, OutputPath: out16, Samples: n}))
	pcm, err := ReadWAVFile(out16)
	require.NoError(t, err)
	require.Equal(t, n, pcm.Frames())
	require.Greater(t, toneLevel(pcm, 15000, 0, 48000), 0.1, "the bed sounds where it has sound")
	for i, v := range pcm.Samples[2*48000+480:] {
		require.Zero(t, v, "silence after the bed's end, frame %d", 2*48000+480+i)
	}

	outLong := filepath.Join(dir, "long-bed.wav")
	require.NoError(t, RenderBed(ctxT(t), BedParams{InputPath: long, OutputPath: outLong, Channels: 2, Samples: n}))
	pcm, err = ReadWAVFile(outLong)
	require.NoError(t, err)
	require.Equal(t, n, pcm.Frames(), "trimmed to the programme")
	require.Equal(t, 2, pcm.Channels)
	require.Greater(t, toneLevel(pcm, 15000, n-48000, n), 0.1, "sound up to the programme's last second")
}

// TestMixOverBedDucksAndNormalises mixes speech at 2 s over an 8 s bed (a 15 kHz
// tone, where espeak-ng's 22 kHz speech has nothing): the bed is quieter while the
// line speaks than before it, and the normalised mix is at the target loudness.
func TestMixOverBedDucksAndNormalises(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := ctxT(t)
	const rate, n = 48000, 8 * 48000
	said := speech(t, dir, "line.wav", "The bed goes down while this line is spoken, and comes back after it.")
	fitted := filepath.Join(dir, "line48.wav")
	ffmpegGen(t, "-i", said, "-ar", "48000", "-ac", "1", fitted)
	line, err := ReadWAVFile(fitted)
	require.NoError(t, err)
	dialogue := filepath.Join(dir, "dialogue.wav")
	require.NoError(t, assemble(ctx, AssembleParams{OutputPath: dialogue, Samples: n, Clips: []Clip{{Path: fitted, Offset: 2 * rate}}}))
	bed := filepath.Join(dir, "bed.wav")
	require.NoError(t, RenderBed(ctx, BedParams{InputPath: bedTone(t, dir, "tone.wav", 15000, 0.1, 8, 1), OutputPath: bed, Samples: n}))

	lineEnd := 2*rate + line.Frames()
	require.Less(t, lineEnd, 7*rate)
	plain := filepath.Join(dir, "plain.wav")
	_, err = MixOverBed(ctx, BedMixParams{DialoguePath: dialogue, BedPath: bed, OutputPath: plain, Samples: n})
	require.NoError(t, err)
	pcm, err := ReadWAVFile(plain)
	require.NoError(t, err)
	require.Equal(t, n, pcm.Frames())
	before := toneLevel(pcm, 15000, rate/2, 3*rate/2)
	during := toneLevel(pcm, 15000, 2*rate+rate/4, 2*rate+rate/4+rate/2)
	t.Logf("bed level before the line %.4f, during it %.4f (%.1f dB)", before, during, 20*math.Log10(during/before))
	require.InDelta(t, 0.1, before, 0.01, "the bed at its own level between lines")
	require.Less(t, during, before/2, "ducked by more than 6 dB while the line speaks")

	// The ducking's settings: at 1:1 the bed stays at its level under the line; a
	// lower threshold at 20:1 ducks deeper than the defaults; out of range is
	// refused before anything is written.
	depth := func(d DuckParams) float64 {
		out := filepath.Join(dir, fmt.Sprintf("duck-%g-%g.wav", d.ThresholdDB, d.Ratio))
		_, err := MixOverBed(ctx, BedMixParams{DialoguePath: dialogue, BedPath: bed, OutputPath: out, Samples: n, Duck: d})
		require.NoError(t, err)
		pcm, err := ReadWAVFile(out)
		require.NoError(t, err)
		return 20 * math.Log10(toneLevel(pcm, 15000, 2*rate+rate/4, 2*rate+rate/4+rate/2)/toneLevel(pcm, 15000, rate/2, 3*rate/2))
	}
	flat, hard := depth(DuckParams{Ratio: 1}), depth(DuckParams{ThresholdDB: -45, Ratio: 20})
	def := 20 * math.Log10(during/before)
	t.Logf("bed under the line: %.1f dB at 1:1, %.1f dB by default, %.1f dB at -45 dBFS 20:1", flat, def, hard)
	require.InDelta(t, 0, flat, 0.5, "1:1 does not duck")
	require.Less(t, hard, def-3, "a lower threshold and a harder ratio duck deeper")
	for _, d := range []DuckParams{{Ratio: 0.5}, {ThresholdDB: -70}, {ThresholdDB: 3}, {AttackMs: 3000}, {ReleaseMs: -1}} {
		out := filepath.Join(dir, "refused.wav")
		_, err := MixOverBed(ctx, BedMixParams{DialoguePath: dialogue, BedPath: bed, OutputPath: out, Samples: n, Duck: d})
		require.ErrorIs(t, err, ErrInvalid, "%+v", d)
		require.NoFileExists(t, out)
	}

	for _, target := range []float64{-23, -16} {
		out := filepath.Join(dir, "norm"+strconv.Itoa(int(-target))+".wav")
		res, err := MixOverBed(ctx, BedMixParams{DialoguePath: dialogue, BedPath: bed, OutputPath: out, Samples: n,
			Normalize: true, TargetLUFS: target, BitDepth: 24, Channels: 2})
		require.NoError(t, err)
		got := integratedLUFS(t, out)
		t.Logf("target %v LUFS: measured before %.1f, gain %.1f dB, limited %v; after %.1f LUFS", target, res.InputLUFS, res.GainDB, res.Limited, got)
		require.InDelta(t, target, got, 1, "within 1 LU of the target")
	}
}

// truePeakDB measures a file's true peak (dBTP) with ffmpeg's ebur128 filter, to
// 0.001 of full scale (its metadata; the summary gives 0.1 dB).
func truePeakDB(t testing.TB, path string) float64 {
	t.Helper()
	out, err := exec.Command("ffmpeg", "-v", "error", "-nostdin", "-i", path, "-af",
		"ebur128=peak=true:metadata=1,ametadata=mode=print:key=lavfi.r128.true_peak:file=-", "-f", "null", "-").CombinedOutput()
	require.NoError(t, err, "%s", out)
	peak := 0.0
	for _, m := range regexp.MustCompile(`lavfi\.r128\.true_peak=([0-9.]+)`).FindAllSubmatch(out, -1) {
		v, err := strconv.ParseFloat(string(m[1]), 64)
		require.NoError(t, err)
		peak = max(peak, v)
	}
	require.Positive(t, peak, "%s", out)
	return 20 * math.Log10(peak)
}

// TestMixOverBedLimiterKeepsTimeAndTruePeak normalises a quiet line with a click
// and a burst of 12 kHz sampled off its peaks (its true peak 3 dB over its sample
// peak) to -16 LUFS, so the limiter engages: the click stays at its sample (the
// limiter's look-ahead once delayed the mix by its 5 ms attack), and the mix's true
// peak is at most the -1 dBTP ceiling, within ebur128's reading (0.001 of full
// scale, about 0.01 dB).
func TestMixOverBedLimiterKeepsTimeAndTruePeak(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := ctxT(t)
	const rate, n, clickAt = 48000, 4 * 48000, 96_000
	line := writeClip(t, dir, "line.wav", n, func(i int) int16 {
		v := 1000 * math.Sin(2*math.Pi*1000*float64(i)/rate)
		if i >= 120_000 && i < 120_240 {
			v += 12000 * math.Sin(2*math.Pi*12000*float64(i)/rate+math.Pi/4)
		}
		if i == clickAt {
			v = 30000
		}
		return int16(v)
	})
	bed := writeClip(t, dir, "bed.wav", n, func(int) int16 { return 0 })
	out := filepath.Join(dir, "mix.wav")
	res, err := MixOverBed(ctx, BedMixParams{DialoguePath: line, BedPath: bed, OutputPath: out, Samples: n,
		Normalize: true, TargetLUFS: -16})
	require.NoError(t, err)
	require.True(t, res.Limited, "%+v", res)
	pcm, err := ReadWAVFile(out)
	require.NoError(t, err)
	require.Equal(t, n, pcm.Frames())
	loudest := clickAt - 2000
	for i := clickAt - 2000; i < clickAt+2000; i++ {
		if math.Abs(float64(pcm.Samples[i])) > math.Abs(float64(pcm.Samples[loudest])) {
			loudest = i
		}
	}
	require.Equal(t, clickAt, loudest, "the click at its own sample")
	tp := truePeakDB(t, out)
	t.Logf("gain %.1f dB; true peak %.3f dBTP", res.GainDB, tp)
	require.LessOrEqual(t, tp, DefaultMixTruePeakDB+0.01)
}
