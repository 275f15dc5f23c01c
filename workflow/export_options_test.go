package workflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/audio"
	"dubstudio/studio"
	"dubstudio/studio/script"
)

// TestExportForAMixer renders the scene, approves its first two lines and edits a
// third after rendering, then checks what a mixer needs: approved-only mixes and stems
// as long as the whole programme (not to the last approved line); the changed line
// left out of an all-done export and listed, or put in on request and marked; each
// line's slot and final span in the manifest; subtitles without speaker names unless
// asked; and stereo 24-bit mixes and stems with a Broadcast WAV time reference.
func TestExportForAMixer(t *testing.T) {
	t.Parallel()
	b := renderScene(t)
	ctx := context.Background()
	const rate = 48000
	lines := b.Lines(t)
	for _, l := range lines[:2] {
		require.NoError(t, b.Store.ApproveTake(ctx, b.Editor.ID, b.Project.ID, *l.CurrentTakeID))
	}
	lastEnd := lines[len(lines)-1].EndMs // 12600 ms: line 7's slot

	t.Run("approved only runs the programme's length", func(t *testing.T) {
		ex := b.export(t, true)
		require.Len(t, ex.manifest.Lines, 2)
		require.GreaterOrEqual(t, ex.manifest.Samples, audio.SamplesFor(lastEnd, rate), "the mix runs to the last line's slot")
		mix := ex.wav(t, "mix.wav")
		require.EqualValues(t, ex.manifest.Samples, mix.Frames())
		for _, s := range mix.Samples[audio.SamplesFor(lines[2].StartMs, rate):] {
			require.Zero(t, s, "silence where lines are not approved")
		}
		for _, name := range ex.manifest.Stems {
			require.Equal(t, mix.Frames(), ex.wav(t, name).Frames(), name)
		}
		checkArchive(t, b, b.Lines(t), ex)
	})

	t.Run("the manifest keeps each line's slot and final span", func(t *testing.T) {
		ex := b.export(t, false)
		byIdx := map[int]studio.Line{}
		for _, l := range lines {
			byIdx[l.Idx] = l
		}
		for _, ml := range ex.manifest.Lines {
			l := byIdx[ml.Index]
			tk, err := b.Store.Take(ctx, b.Project.ID, ml.TakeID)
			require.NoError(t, err)
			require.Equal(t, l.StartMs, ml.SlotStartMs, "line %d", ml.Index)
			require.Equal(t, l.EndMs, ml.SlotEndMs, "line %d", ml.Index)
			require.Equal(t, tk.BorrowedMs, ml.BorrowedMs, "line %d", ml.Index)
			require.Equal(t, ml.SlotStartMs+ml.DurationMs, ml.EndMs, "line %d: the final span is where the take ends", ml.Index)
			require.InDelta(t, ml.SlotEndMs+ml.BorrowedMs, ml.EndMs, 1, "line %d: final end = slot end + borrowed", ml.Index)
			require.False(t, ml.Stale)
		}
		require.Empty(t, ex.manifest.LeftOut)
		cues, err := script.Parse("subtitles.srt", ex.entries["subtitles.srt"])
		require.NoError(t, err)
		for _, c := range cues {
			require.Empty(t, c.Character, "no speaker names by default: %q", c.Text)
		}
		require.NotContains(t, string(ex.entries["subtitles.vtt"]), "Alice")
		// ASS keeps the actors in its Name field, which players do not show.
		assCues, err := script.Parse("subtitles.ass", ex.entries["subtitles.ass"])
		require.NoError(t, err)
		require.Equal(t, "Alice", assCues[0].Character)
		require.Equal(t, "Bob", assCues[1].Character)

		named := b.exportWith(t, studio.ExportOptions{SpeakerNames: true})
		for _, name := range []string{"subtitles.srt", "subtitles.vtt"} {
			cues, err := script.Parse(name, named.entries[name])
			require.NoError(t, err)
			require.Equal(t, "Alice", cues[0].Character, name)
			require.Equal(t, "Bob", cues[1].Character, name)
		}
	})

	// Line 3's text changes after its take was rendered; line 4 only gets a note.
	changed := lines[2]
	text := "In this rain?"
	_, err := b.Store.UpdateLine(ctx, b.Editor.ID, b.Project.ID, changed.ID, studio.LineEdit{BaseRevision: changed.Revision, Text: &text})
	require.NoError(t, err)
	note := "softer"
	_, err = b.Store.UpdateLine(ctx, b.Editor.ID, b.Project.ID, lines[3].ID, studio.LineEdit{BaseRevision: lines[3].Revision, Notes: &note})
	require.NoError(t, err)

	t.Run("a take of a changed line is left out and listed", func(t *testing.T) {
		ex := b.export(t, false)
		var idx []int
		for _, ml := range ex.manifest.Lines {
			idx = append(idx, ml.Index)
		}
		require.Equal(t, []int{1, 2, 4, 5, 6, 7}, idx, "line 3 is left out; a note does not make line 4's take stale")
		want := []studio.LeftOutLine{{Index: 3, LineID: changed.ID, TakeID: *changed.CurrentTakeID, Reason: "changed", Text: text}}
		require.Equal(t, want, ex.manifest.LeftOut)
		require.Equal(t, want, ex.row.LeftOut, "the export's row lists it too")
		mix := ex.wav(t, "mix.wav")
		for _, s := range mix.Samples[audio.SamplesFor(changed.StartMs, rate):audio.SamplesFor(lines[3].StartMs, rate)] {
			require.Zero(t, s, "silence where the changed line was")
		}
		cues, err := script.Parse("subtitles.srt", ex.entries["subtitles.srt"])
		require.NoError(t, err)
		require.Len(t, cues, 6)

		with := b.exportWith(t, studio.ExportOptions{IncludeStale: true})
		require.Len(t, with.manifest.Lines, 7)
		require.True(t, with.manifest.Lines[2].Stale, "an included stale take is marked")
		require.Empty(t, with.manifest.LeftOut)
		require.Empty(t, with.row.LeftOut)
	})

	t.Run("stereo 24-bit with a Broadcast WAV time reference at 29.97 drop-frame", func(t *testing.T) {
		// A source longer than the script makes the programme that long.
		take, err := b.Store.Take(ctx, b.Project.ID, *lines[0].CurrentTakeID)
		require.NoError(t, err)
		require.NoError(t, b.Store.SetProjectSource(ctx, studio.ProjectSource{ProjectID: b.Project.ID, AudioSHA256: take.AudioSHA256,
			FileName: "source.wav", DurationMs: 15000, Channels: 1}))
		ex := b.exportWith(t, studio.ExportOptions{ApprovedOnly: true, Stereo: true, BitDepth: 24, StartTimecode: "01:00:00;10", FPS: script.FPS2997})
		man := ex.manifest
		// An hour of drop-frame labels less the 108 it skips, and 10 frames, each
		// 1001/30000 s: an hour at 29.97 runs 3.6 ms short of the clock's.
		frames := int64(3600*30 - 54*2 + 10)
		ref := frames * rate * 1001 / 30000
		require.Equal(t, ref, man.TimeReference)
		require.Equal(t, script.FPS2997, man.FPS)
		require.Equal(t, "01:00:00;10", man.StartTimecode)
		require.Equal(t, 2, man.Channels)
		require.Equal(t, 24, man.BitDepth)
		require.Equal(t, audio.SamplesFor(15000, rate), man.Samples, "the programme runs to the source's end")
		dir := t.TempDir()
		for _, name := range append([]string{"mix.wav"}, man.Stems...) {
			body := ex.entries[name]
			got, ok, err := audio.ReadTimeReference(bytes.NewReader(body))
			require.NoError(t, err, name)
			require.True(t, ok, "%s has a bext chunk", name)
			require.Equal(t, ref, got, name)
			path := filepath.Join(dir, "x.wav")
			require.NoError(t, os.WriteFile(path, body, 0o600))
			out, err := exec.CommandContext(ctx, "ffprobe", "-v", "error", "-show_entries",
				"stream=channels,bits_per_sample,duration_ts:format_tags=time_reference", "-of", "json", path).Output()
			require.NoError(t, err, name)
			var probe struct {
				Streams []struct {
					Channels      int   `json:"channels"`
					BitsPerSample int   `json:"bits_per_sample"`
					DurationTS    int64 `json:"duration_ts"`
				} `json:"streams"`
				Format struct {
					Tags map[string]string `json:"tags"`
				} `json:"format"`
			}
			require.NoError(t, json.Unmarshal(out, &probe), string(out))
			require.Len(t, probe.Streams, 1, name)
			require.Equal(t, 2, probe.Streams[0].Channels, name)
			require.Equal(t, 24, probe.Streams[0].BitsPerSample, name)
			require.Equal(t, man.Samples, probe.Streams[0].DurationTS, name)
			require.Equal(t, strconv.FormatInt(ref, 10), probe.Format.Tags["time_reference"], name)
		}
		// Per-line files stay the takes, unchanged (16-bit mono).
		for _, ml := range man.Lines {
			ex.wav(t, ml.File)
		}
	})

	t.Run("bad options are refused and change nothing", func(t *testing.T) {
		before, err := b.Store.Exports(ctx, b.Project.ID)
		require.NoError(t, err)
		for _, o := range []studio.ExportOptions{{BitDepth: 20}, {FPS: "29"}, {StartTimecode: "1:00:00"}, {StartTimecode: "00:00:00:25"}, {StartTimecode: "24:00:00:00"},
			{StartTimecode: "00:00:00;10"}, {StartTimecode: "00:01:00;00", FPS: script.FPS2997}} {
			_, err := b.Pipeline.Export(ctx, b.Project.ID, b.Editor.ID, o)
			require.ErrorIs(t, err, studio.ErrInvalid, "%+v", o)
		}
		after, err := b.Store.Exports(ctx, b.Project.ID)
		require.NoError(t, err)
		require.Len(t, after, len(before))
	})
}
