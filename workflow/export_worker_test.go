package workflow_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/audio"
	"dubstudio/studio"
	"dubstudio/studio/script"
	"dubstudio/workflow"
)

// exportScript is a short scene: two speakers, a narrator and an unassigned line, with
// gaps a line may borrow from and one overlap (lines 3 and 4), as real scripts have,
// and a character whose stem name would clash with the unassigned lines' one.
var exportScript = []studio.NewLine{
	{SourceLine: 1, StartMs: 0, EndMs: 1500, CharacterName: "Alice", Text: "Where were you last night?"},
	{SourceLine: 2, StartMs: 2000, EndMs: 3800, CharacterName: "Bob", Text: "Out walking, like I said."},
	{SourceLine: 3, StartMs: 4000, EndMs: 5200, CharacterName: "Alice", Text: "In the rain?"},
	{SourceLine: 4, StartMs: 4800, EndMs: 6500, CharacterName: "Bob", Text: "Rain never stopped me."},
	{SourceLine: 5, StartMs: 7003, EndMs: 9000, CharacterName: "Narrator", Text: "She did not believe him."},
	{SourceLine: 6, StartMs: 9517, EndMs: 11000, Text: "Nobody said a word."},
	{SourceLine: 7, StartMs: 11400, EndMs: 12600, CharacterName: "None", Text: "Not me, anyway."},
}

// exported is an export archive read back.
type exported struct {
	row      *studio.Export
	sum      [32]byte
	entries  map[string][]byte
	manifest workflow.Manifest
}

func (e exported) wav(t *testing.T, name string) audio.PCM {
	t.Helper()
	b, ok := e.entries[name]
	require.True(t, ok, "%s is in the archive", name)
	pcm, err := audio.ReadWAV(bytes.NewReader(b))
	require.NoError(t, err, name)
	require.Equal(t, 48000, pcm.SampleRate, name)
	require.Equal(t, 1, pcm.Channels, name)
	return pcm
}

// export runs an export through the pipeline and the worker, as the web app does,
// and opens the archive.
func (b *testBundle) export(t *testing.T, approvedOnly bool) exported {
	t.Helper()
	return b.exportWith(t, studio.ExportOptions{ApprovedOnly: approvedOnly})
}

// exportWith is export with options.
func (b *testBundle) exportWith(t *testing.T, opts studio.ExportOptions) exported {
	t.Helper()
	ctx := context.Background()
	ex, err := b.Pipeline.Export(ctx, b.Project.ID, b.Editor.ID, opts)
	require.NoError(t, err)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ex, err = b.Store.Export(ctx, b.Project.ID, ex.ID)
		require.NoError(t, err)
		if ex.State == studio.ExportDone || ex.State == studio.ExportFailed {
			break
		}
		require.True(t, time.Now().Before(deadline), "export %d still %s", ex.ID, ex.State)
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, studio.ExportDone, ex.State, ex.Error)
	require.Equal(t, 100, ex.Progress)

	data, err := os.ReadFile(workflow.ExportPath(b.DataDir, ex.ID))
	require.NoError(t, err)
	require.EqualValues(t, len(data), ex.SizeBytes)
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	out := exported{row: ex, sum: sha256.Sum256(data), entries: map[string][]byte{}}
	for _, f := range zr.File {
		r, err := f.Open()
		require.NoError(t, err)
		body, err := io.ReadAll(r)
		require.NoError(t, err)
		r.Close()
		out.entries[f.Name] = body
	}
	require.NoError(t, json.Unmarshal(out.entries["manifest.json"], &out.manifest))
	require.Len(t, out.manifest.Lines, ex.Lines)
	return out
}

// renderScene imports exportScript and renders it with espeak-ng.
func renderScene(t *testing.T) *testBundle {
	t.Helper()
	b := setup(t, 0)
	ctx := context.Background()
	_, err := b.Store.ImportLines(ctx, b.Editor.ID, b.Project.ID, exportScript)
	require.NoError(t, err)
	b.startWorker(t, workerOpts{})
	_, err = b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	counts := b.WaitSettled(t, 3*time.Minute)
	require.Equal(t, len(exportScript), counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)
	return b
}

// TestExportOfARenderedProject renders a scene with espeak-ng, approves some lines and
// exports it the way the app does; the archive is then checked against the takes and
// the script: every line at its timecode to the sample, stems that add up to the mix,
// durations and subtitles as the manifest says, approved-only or all done takes, and
// the same bytes every time.
func TestExportOfARenderedProject(t *testing.T) {
	t.Parallel()
	b := renderScene(t)
	ctx := context.Background()
	lines := b.Lines(t)
	approved := map[int]bool{1: true, 2: true, 3: true, 5: true}
	for _, l := range lines {
		if approved[l.Idx] {
			require.NoError(t, b.Store.ApproveTake(ctx, b.Editor.ID, b.Project.ID, *l.CurrentTakeID))
		}
	}
	lines = b.Lines(t)

	t.Run("all done takes", func(t *testing.T) {
		ex := b.export(t, false)
		require.Len(t, ex.manifest.Lines, len(lines))
		checkArchive(t, b, lines, ex)
		for _, ml := range ex.manifest.Lines {
			require.Equal(t, approved[ml.Index], ml.Approved, "line %d", ml.Index)
		}
		require.Equal(t, []string{"stems/Alice.wav", "stems/Bob.wav", "stems/Narrator.wav", "stems/None-2.wav", "stems/none.wav"},
			ex.manifest.Stems, "one stem per character, none overwriting another")
	})

	t.Run("approved takes only", func(t *testing.T) {
		ex := b.export(t, true)
		var idx []int
		for _, ml := range ex.manifest.Lines {
			require.True(t, ml.Approved)
			idx = append(idx, ml.Index)
		}
		require.Equal(t, []int{1, 2, 3, 5}, idx)
		checkArchive(t, b, lines, ex)
		require.Equal(t, []string{"stems/Alice.wav", "stems/Bob.wav", "stems/Narrator.wav"}, ex.manifest.Stems)

		// The same approved takes give the same bytes: the audio and the whole archive.
		again := b.export(t, true)
		require.Equal(t, ex.sum, again.sum, "a second export of the same takes is byte-identical")
		for name, body := range ex.entries {
			require.True(t, bytes.Equal(body, again.entries[name]), name)
		}

		// Going back to another take changes the export; approving it again restores it.
		l := lines[0]
		n, err := b.Pipeline.RenderLines(ctx, b.Project.ID, []int64{l.ID})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		b.WaitSettled(t, time.Minute)
		fresh, err := b.Store.Line(ctx, b.Project.ID, l.ID)
		require.NoError(t, err)
		require.NotEqual(t, *l.ApprovedTakeID, *fresh.CurrentTakeID)
		require.Equal(t, *l.ApprovedTakeID, *fresh.ApprovedTakeID, "a new take does not replace the approved one")
		same := b.export(t, true)
		require.Equal(t, ex.sum, same.sum, "a new unapproved take leaves the approved export alone")
		require.NoError(t, b.Store.ApproveTake(ctx, b.Editor.ID, b.Project.ID, *fresh.CurrentTakeID))
		other := b.export(t, true)
		require.NotEqual(t, ex.sum, other.sum)
		require.Equal(t, *fresh.CurrentTakeID, other.manifest.Lines[0].TakeID)
	})
}

// checkArchive checks an export against the project's lines and their takes.
func checkArchive(t *testing.T, b *testBundle, lines []studio.Line, ex exported) {
	t.Helper()
	ctx := context.Background()
	const rate = 48000
	byIdx := map[int]studio.Line{}
	for _, l := range lines {
		byIdx[l.Idx] = l
	}
	man := ex.manifest
	require.Equal(t, rate, man.SampleRate)
	mix := ex.wav(t, "mix.wav")
	require.EqualValues(t, man.Samples, mix.Frames(), "the mix is as long as the manifest says")
	atFullScale := int64(0)
	for _, v := range mix.Samples {
		if v == math.MaxInt16 || v == math.MinInt16 {
			atFullScale++
		}
	}
	require.Equal(t, atFullScale, man.ClippedSamples, "the manifest counts the mix's clipped samples")

	// Each line's WAV is its take, as long as the manifest says.
	clips := make([]audio.PCM, len(man.Lines))
	offsets := make([]int64, len(man.Lines))
	for i, ml := range man.Lines {
		l, ok := byIdx[ml.Index]
		require.True(t, ok, "line %d", ml.Index)
		tk, err := b.Store.Take(ctx, b.Project.ID, ml.TakeID)
		require.NoError(t, err)
		require.Equal(t, l.ID, tk.LineID)
		if ml.Approved {
			require.Equal(t, *l.ApprovedTakeID, tk.ID)
		}
		require.Equal(t, tk.AudioSHA256, ml.SHA256)
		require.Equal(t, l.StartMs, ml.StartMs)
		clip := ex.wav(t, ml.File)
		sum := sha256.Sum256(ex.entries[ml.File])
		require.Equal(t, ml.SHA256, hex.EncodeToString(sum[:]), "line %d is its take's audio, unchanged", ml.Index)
		require.EqualValues(t, clip.Frames(), ml.Samples, "line %d", ml.Index)
		require.Equal(t, int(ml.Samples*1000/rate), ml.DurationMs, "line %d", ml.Index)
		require.Equal(t, tk.DurationMs, ml.DurationMs, "line %d", ml.Index)
		require.Equal(t, ml.StartMs+ml.DurationMs, ml.EndMs, "line %d", ml.Index)
		require.InDelta(t, audio.SamplesFor(l.DurationMs()+tk.BorrowedMs, rate), ml.Samples, 1, "line %d fills its slot", ml.Index)
		require.InDelta(t, tk.StretchRatio, ml.StretchRatio, 1e-9)
		clips[i] = clip
		offsets[i] = int64(math.Round(float64(l.StartMs) * rate / 1000))
		require.Equal(t, audio.SamplesFor(l.StartMs, rate), offsets[i])
	}

	// Every line sits at its timecode: where it overlaps nothing, the mix holds exactly
	// its samples there, and the best match for its speech within ±50 ms of the
	// timecode is at the timecode, to the sample.
	for i, clip := range clips {
		overlaps := false
		for j := range clips {
			if j != i && offsets[j] < offsets[i]+int64(clip.Frames()) && offsets[i] < offsets[j]+int64(clips[j].Frames()) {
				overlaps = true
			}
		}
		if overlaps {
			continue
		}
		got := mix.Samples[offsets[i] : offsets[i]+int64(clip.Frames())]
		require.Equal(t, clip.Samples, got, "line %d is in the mix at its timecode", man.Lines[i].Index)
		found := bestOffset(mix.Samples, clip.Samples, offsets[i], rate/20)
		require.InDelta(t, offsets[i], found, 1, "line %d", man.Lines[i].Index)
	}
	// Elsewhere the mix is the sum of the lines there (overlaps included) and silence.
	want := make([]int32, mix.Frames())
	for i, clip := range clips {
		for k, v := range clip.Samples {
			want[offsets[i]+int64(k)] += int32(v)
		}
	}
	for k, v := range want {
		require.Equal(t, int16(min(max(v, math.MinInt16), math.MaxInt16)), mix.Samples[k], "mix sample %d", k)
	}

	// The stems, one per character, add up to the mix, sample for sample (nothing
	// clips at the loudness the duration lock normalises to).
	require.NotEmpty(t, man.Stems)
	total := make([]int32, mix.Frames())
	for _, name := range man.Stems {
		stem := ex.wav(t, name)
		require.Equal(t, mix.Frames(), stem.Frames(), name)
		for k, v := range stem.Samples {
			total[k] += int32(v)
		}
	}
	for k, v := range total {
		require.Less(t, math.Abs(float64(v)), 32768.0, "sample %d clips", k)
		require.Equal(t, mix.Samples[k], int16(v), "stems sum to the mix at sample %d", k)
	}

	// Subtitles carry the final timings, and the CSV manifest agrees with the JSON one.
	// ASS, at its centisecond precision, with each line's character as its actor.
	for _, name := range []string{"subtitles.srt", "subtitles.vtt", "subtitles.ass"} {
		cues, err := script.Parse(name, ex.entries[name])
		require.NoError(t, err, name)
		require.Len(t, cues, len(man.Lines), name)
		within := 0.0
		if name == "subtitles.ass" {
			within = 5
		}
		for i, c := range cues {
			require.InDelta(t, man.Lines[i].StartMs, c.Start.Milliseconds(), within, name)
			require.InDelta(t, man.Lines[i].EndMs, c.End.Milliseconds(), within, name)
			require.Equal(t, man.Lines[i].Text, c.Text, name)
			if name == "subtitles.ass" {
				require.Equal(t, man.Lines[i].Character, c.Character, name)
			}
		}
	}
	rows, err := csv.NewReader(bytes.NewReader(ex.entries["manifest.csv"])).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, len(man.Lines)+1)
	for i, ml := range man.Lines {
		r := rows[i+1]
		require.Equal(t, []string{strconv.Itoa(ml.Index), strconv.Itoa(ml.StartMs), strconv.Itoa(ml.EndMs),
			strconv.FormatInt(ml.TakeID, 10), strconv.Itoa(ml.DurationMs), strconv.FormatInt(ml.Samples, 10), ml.File, ml.SHA256},
			[]string{r[0], r[1], r[2], r[5], r[7], r[8], r[10], r[11]})
	}
}

// bestOffset returns the offset within ±window of around where a stretch of needle's
// speech matches hay most closely (least absolute difference).
func bestOffset(hay, needle []int16, around int64, window int) int64 {
	// The first loud part of the needle: silence would match anywhere.
	from := 0
	for from < len(needle) && abs16(needle[from]) < 1000 {
		from++
	}
	n := min(4096, len(needle)-from)
	best, bestErr := around, int64(math.MaxInt64)
	for off := around - int64(window); off <= around+int64(window); off++ {
		if off < 0 || off+int64(from+n) > int64(len(hay)) {
			continue
		}
		var e int64
		for k := range n {
			d := int64(hay[off+int64(from+k)]) - int64(needle[from+k])
			if d < 0 {
				d = -d
			}
			e += d
			if e >= bestErr {
				break
			}
		}
		if e < bestErr {
			best, bestErr = off, e
		}
	}
	return best
}

func abs16(v int16) int32 {
	if v < 0 {
		return -int32(v)
	}
	return int32(v)
}
