package workflow_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/audio"
	"dubstudio/media"
	"dubstudio/studio"
	"dubstudio/tts"
	"dubstudio/workflow"
)

// bedScript has lines with long gaps, so the ducked bed has time to come back up
// between them (its release is 400 ms).
var bedScript = []studio.NewLine{
	{SourceLine: 1, StartMs: 500, EndMs: 2500, CharacterName: "Alice", Text: "The music goes down while I speak."},
	{SourceLine: 2, StartMs: 6000, EndMs: 8000, CharacterName: "Bob", Text: "And it comes back up after me."},
	{SourceLine: 3, StartMs: 12000, EndMs: 14000, CharacterName: "Alice", Text: "Every line ducks it again."},
}

// bedToneLevel is the amplitude (of full scale) of the 15 kHz bed in channel 0 of p
// between msFrom and msTo (Goertzel). espeak-ng speaks at 22050 Hz, so the takes have
// nothing at 15 kHz: this is the bed's level alone, whatever the lines do.
func bedToneLevel(p audio.PCM, msFrom, msTo int) float64 {
	from, to := msFrom*p.SampleRate/1000, msTo*p.SampleRate/1000
	w := 2 * math.Pi * 15000 / float64(p.SampleRate)
	c := 2 * math.Cos(w)
	var s1, s2 float64
	for i := from; i < to; i++ {
		s := float64(p.Samples[i*p.Channels])/32768 + c*s1 - s2
		s2, s1 = s1, s
	}
	return 2 * math.Sqrt(max(s1*s1+s2*s2-c*s1*s2, 0)) / float64(to-from)
}

// ebur128 measures the integrated loudness of a WAV with ffmpeg's ebur128 filter.
func ebur128(t *testing.T, wav []byte) float64 {
	t.Helper()
	p := filepath.Join(t.TempDir(), "measure.wav")
	require.NoError(t, os.WriteFile(p, wav, 0o600))
	out, err := exec.Command("ffmpeg", "-hide_banner", "-nostdin", "-i", p, "-af", "ebur128", "-f", "null", "-").CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := regexp.MustCompile(`(?s)Summary:.*?I:\s+(-?[0-9.]+) LUFS`).FindSubmatch(out)
	require.NotNil(t, m, "%s", out)
	v, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	return v
}

// TestExportWithTheBed renders a three-line scene with espeak-ng over a 20 s M&E bed
// (a 15 kHz tone at -20 dBFS; the programme is 14 s) and checks the export: the
// bed's stem is the programme's length from 0 (trimmed), in the stems' format with
// their time reference; the mix over the bed has the bed measurably lower while each
// line speaks than between lines, and its loudness is within 1 LU of -23 LUFS; a bed
// shorter than the programme is padded with silence; a mix over the bed without a
// bed is refused before anything is queued.
func TestExportWithTheBed(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	ctx := context.Background()
	_, err := b.Store.ImportLines(ctx, b.Editor.ID, b.Project.ID, bedScript)
	require.NoError(t, err)

	_, err = b.Pipeline.Export(ctx, b.Project.ID, b.Editor.ID, studio.ExportOptions{BedMix: true})
	require.ErrorIs(t, err, studio.ErrInvalid, "no bed yet")
	exports, err := b.Store.Exports(ctx, b.Project.ID)
	require.NoError(t, err)
	require.Empty(t, exports, "nothing queued")

	// The ducking is a setting (BED_DUCK_*): harder and quicker than the defaults.
	duck := audio.DuckParams{ThresholdDB: -36, Ratio: 6, AttackMs: 15, ReleaseMs: 300}
	b.startWorker(t, workerOpts{bedDuck: duck})
	_, err = b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	counts := b.WaitSettled(t, 3*time.Minute)
	require.Equal(t, len(bedScript), counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)

	lib := media.NewLibrary(b.Store, studio.BlobStore{Dir: filepath.Join(b.DataDir, "blobs")})
	dir := t.TempDir()
	bedFile := func(name string, seconds int) media.Upload {
		p := filepath.Join(dir, name)
		out, err := exec.Command("ffmpeg", "-v", "error", "-nostdin", "-y", "-f", "lavfi", "-i",
			"aevalsrc=0.1*sin(15000*2*PI*t)|0.1*sin(15000*2*PI*t):s=44100:d="+strconv.Itoa(seconds), p).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return media.Upload{Path: p, Name: name}
	}
	_, err = lib.SetProjectBed(ctx, b.Project.ID, b.Editor.ID, studio.BedME, bedFile("me.flac", 20))
	require.NoError(t, err)

	const rate = 48000
	ex := b.exportWith(t, studio.ExportOptions{BedMix: true})
	man := ex.manifest
	require.GreaterOrEqual(t, man.Samples, audio.SamplesFor(14000, rate))
	require.NotNil(t, man.Bed)
	require.Equal(t, "bed.wav", man.Bed.File)
	require.Equal(t, "me", man.Bed.Kind)
	require.Equal(t, man.Samples, man.Bed.Samples)
	bed := ex.wav(t, "bed.wav")
	require.EqualValues(t, man.Samples, bed.Frames(), "the bed's stem is the programme's length: the 20 s bed trimmed")
	require.InDelta(t, 0.1, bedToneLevel(bed, 0, 1000), 0.01, "the bed from the first sample")
	ms := int(man.Samples * 1000 / rate)
	require.InDelta(t, 0.1, bedToneLevel(bed, ms-1000, ms), 0.01, "and to the last")
	require.Equal(t, ex.wav(t, "mix.wav").Frames(), bed.Frames())
	for _, name := range man.Stems {
		require.NotEqual(t, "bed.wav", filepath.Base(name), "the bed is not a character's stem")
	}

	require.NotNil(t, man.Bed.Mix)
	require.Equal(t, "mix_over_bed.wav", man.Bed.Mix.File)
	over := ex.wav(t, "mix_over_bed.wav")
	require.EqualValues(t, man.Samples, over.Frames())
	// The bed between lines (from 1.5 s after a line ends, past the release, to the
	// next line's start) against the bed while each line speaks.
	var quietest float64 = 1
	for i, ml := range man.Lines {
		during := bedToneLevel(over, ml.StartMs+100, ml.EndMs-100)
		// The gap after the line, or before the last one (which ends the programme).
		gap := [2]int{ml.EndMs + 1500, 0}
		if i+1 < len(man.Lines) {
			gap[1] = man.Lines[i+1].StartMs - 100
		} else {
			gap = [2]int{man.Lines[i-1].EndMs + 1500, ml.StartMs - 100}
		}
		require.Greater(t, gap[1]-gap[0], 1000, "line %d: a gap to measure", ml.Index)
		between := bedToneLevel(over, gap[0], gap[1])
		t.Logf("line %d (%d-%d ms): bed %.4f while it speaks, %.4f between lines (%.1f dB)", ml.Index, ml.StartMs, ml.EndMs,
			during, between, 20*math.Log10(during/between))
		require.Less(t, during, between/2, "line %d: the bed ducked by more than 6 dB while it speaks", ml.Index)
		quietest = min(quietest, between)
	}
	require.Greater(t, quietest, 0.0, "the bed sounds between lines")
	lufs := ebur128(t, ex.entries["mix_over_bed.wav"])
	t.Logf("mix over the bed: %.1f LUFS (measured before %.1f, gain %.1f dB, limited %v)", lufs,
		man.Bed.Mix.MeasuredLUFS, man.Bed.Mix.GainDB, man.Bed.Mix.Limited)
	require.InDelta(t, -23, lufs, 1, "within 1 LU of the target")
	require.InDelta(t, -23, man.Bed.Mix.TargetLUFS, 0)
	require.Equal(t, "sidechaincompress", man.Bed.Mix.Ducking)
	used := audio.DuckParams{ThresholdDB: man.Bed.Mix.DuckThresholdDB, Ratio: man.Bed.Mix.DuckRatio,
		AttackMs: man.Bed.Mix.DuckAttackMs, ReleaseMs: man.Bed.Mix.DuckReleaseMs}
	require.Equal(t, duck, used, "the manifest says how the bed was ducked")

	// A bed shorter than the programme, stereo and 24-bit like the stems, with their
	// time reference; no mix over it unless asked.
	_, err = lib.SetProjectBed(ctx, b.Project.ID, b.Editor.ID, studio.BedFullMix, bedFile("short.wav", 5))
	require.NoError(t, err)
	st := b.exportWith(t, studio.ExportOptions{Stereo: true, BitDepth: 24, StartTimecode: "01:00:00:00"})
	require.NotContains(t, st.entries, "mix_over_bed.wav")
	require.Nil(t, st.manifest.Bed.Mix)
	require.Equal(t, "full_mix", st.manifest.Bed.Kind)
	raw := st.entries["bed.wav"]
	ref, ok, err := audio.ReadTimeReference(bytes.NewReader(raw))
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 172_800_000, ref, "the stems' time reference")
	require.EqualValues(t, 2, binary.LittleEndian.Uint16(raw[22:]), "stereo")
	require.EqualValues(t, 24, binary.LittleEndian.Uint16(raw[34:]), "24-bit")
	require.Equal(t, st.manifest.Samples*2*3, int64(len(raw))-headerLen(t, raw), "the programme's length")
	// Decode through ffmpeg to 16-bit to look at the padding.
	p := filepath.Join(dir, "short-bed.wav")
	require.NoError(t, os.WriteFile(p, raw, 0o600))
	p16 := filepath.Join(dir, "short-bed16.wav")
	out, err := exec.Command("ffmpeg", "-v", "error", "-nostdin", "-y", "-i", p, "-c:a", "pcm_s16le", p16).CombinedOutput()
	require.NoError(t, err, "%s", out)
	pcm, err := audio.ReadWAVFile(p16)
	require.NoError(t, err)
	require.EqualValues(t, st.manifest.Samples, pcm.Frames(), "padded to the programme")
	require.InDelta(t, 0.1, bedToneLevel(pcm, 1000, 4000), 0.01, "the short bed plays from 0")
	require.Less(t, bedToneLevel(pcm, 6000, 13000), 0.0005, "silence after the short bed's end")
}

// TestWorkerRefusesADuckingFFmpegWouldNot: a ducking out of sidechaincompress's
// range stops the worker at its start, not every export over a bed later.
func TestWorkerRefusesADuckingFFmpegWouldNot(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	_, err := workflow.NewWorker(b.Pipeline, workflow.NewLocalPermits(tts.NewEspeak(tts.EspeakConfig{}), 1),
		workflow.WorkerConfig{Name: t.Name(), DataDir: b.DataDir, BedDuck: audio.DuckParams{Ratio: 50}}, slog.New(slog.DiscardHandler))
	require.ErrorIs(t, err, audio.ErrInvalid)
	require.ErrorContains(t, err, "ratio 50 (1 to 20)")
}

// headerLen is the length of a WAV's header up to its data.
func headerLen(t *testing.T, wav []byte) int64 {
	t.Helper()
	i := bytes.Index(wav, []byte("data"))
	require.Positive(t, i)
	return int64(i + 8)
}
