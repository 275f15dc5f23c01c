package studio_test

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// projectState is everything an import may change, to compare before and after.
func projectState(t *testing.T, s *studio.Store, projectID int64) string {
	t.Helper()
	ctx := context.Background()
	lines, err := s.AllLines(ctx, projectID)
	require.NoError(t, err)
	chars, err := s.Characters(ctx, projectID)
	require.NoError(t, err)
	out := ""
	for _, l := range lines {
		cid := int64(0)
		if l.CharacterID != nil {
			cid = *l.CharacterID
		}
		out += fmt.Sprintf("%d %d %d-%d %q c%d r%d %s %v\n", l.ID, l.Idx, l.StartMs, l.EndMs, l.Text, cid, l.Revision, l.State, l.Flags)
		h, err := s.LineHistory(ctx, projectID, l.ID)
		require.NoError(t, err)
		out += fmt.Sprintf("  history %d\n", len(h))
	}
	for _, c := range chars {
		out += fmt.Sprintf("char %d %s\n", c.ID, c.Name)
	}
	return out
}

func texts(t *testing.T, s *studio.Store, projectID int64) []string {
	t.Helper()
	lines, err := s.AllLines(context.Background(), projectID)
	require.NoError(t, err)
	var out []string
	for i, l := range lines {
		require.Equal(t, i+1, l.Idx, "numbered densely")
		out = append(out, fmt.Sprintf("%d %s", l.StartMs, l.Text))
	}
	return out
}

func TestImportScriptModes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The project: lines at 0, 2000 and 4000 ms, "Line number 1..3".
	file := []studio.NewLine{
		{SourceLine: 1, StartMs: 1000, EndMs: 1800, CharacterName: "Carol", Text: "Between one and two"},
		{SourceLine: 5, StartMs: 2100, EndMs: 3500, Text: "Line two, rewritten"},
		{SourceLine: 9, StartMs: 4000, EndMs: 5500, CharacterName: "Alice", Text: "Line number 3, said with \"quotes\" & <brackets>."},
	}
	t.Run("append", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 3)
		res, err := b.store.ImportScript(ctx, b.editor.ID, b.project.ID, file, studio.ImportOpts{Mode: studio.ImportAppend})
		require.NoError(t, err)
		require.Equal(t, 2, res.Lines)
		require.Equal(t, 1, res.Duplicates, "the third line repeats the project's exactly")
		require.Equal(t, studio.ImportAction{Kind: studio.ActionDuplicate, Idx: 3}, res.Actions[2])
		require.Equal(t, []string{"Carol"}, res.CharactersCreated)
		require.Equal(t, []string{
			`0 Line number 1, said with "quotes" & <brackets>.`, "1000 Between one and two",
			`2000 Line number 2, said with "quotes" & <brackets>.`, "2100 Line two, rewritten",
			`4000 Line number 3, said with "quotes" & <brackets>.`,
		}, texts(t, b.store, b.project.ID), "numbered in time order")
	})
	t.Run("merge", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 3)
		lines, err := b.store.AllLines(ctx, b.project.ID)
		require.NoError(t, err)
		studiotest.Exec(t, b.store, "UPDATE lines SET state = 'done' WHERE project_id = $1", b.project.ID)
		res, err := b.store.ImportScript(ctx, b.editor.ID, b.project.ID, file, studio.ImportOpts{Mode: studio.ImportMerge})
		require.NoError(t, err)
		require.Equal(t, 1, res.Lines)
		require.Equal(t, 1, res.Updated)
		require.Equal(t, 1, res.Unchanged)
		require.Equal(t, []studio.ImportAction{{Kind: studio.ActionCreate}, {Kind: studio.ActionUpdate, Idx: 2}, {Kind: studio.ActionUnchanged, Idx: 3}}, res.Actions)
		after, err := b.store.AllLines(ctx, b.project.ID)
		require.NoError(t, err)
		require.Len(t, after, 4)
		byID := map[int64]studio.Line{}
		for _, l := range after {
			byID[l.ID] = l
		}
		two, three := byID[lines[1].ID], byID[lines[2].ID]
		require.Equal(t, "Line two, rewritten", two.Text)
		require.Equal(t, 2100, two.StartMs)
		require.Equal(t, lines[1].CharacterID, two.CharacterID, "a file without a name keeps the line's character")
		require.Equal(t, studio.StateDraft, two.State, "a changed line goes back to draft")
		require.Equal(t, lines[1].Revision+1, two.Revision)
		require.Equal(t, 3, two.Idx)
		require.Equal(t, studio.StateDone, three.State, "an unchanged line keeps its state (and takes)")
		require.Equal(t, lines[2].Revision, three.Revision)
		h, err := b.store.LineHistory(ctx, b.project.ID, two.ID)
		require.NoError(t, err)
		require.Equal(t, "import", h[0].Action)
		require.Equal(t, "Line number 2, said with \"quotes\" & <brackets>.", h[0].Before.Text)
	})
	t.Run("replace", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 3)
		res, err := b.store.ImportScript(ctx, b.editor.ID, b.project.ID, file, studio.ImportOpts{Mode: studio.ImportReplace})
		require.NoError(t, err)
		require.Equal(t, 3, res.Deleted)
		require.Equal(t, 3, res.Lines)
		require.Equal(t, []string{"1000 Between one and two", "2100 Line two, rewritten",
			`4000 Line number 3, said with "quotes" & <brackets>.`}, texts(t, b.store, b.project.ID))
	})
	t.Run("dry run changes nothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 3)
		before := projectState(t, b.store, b.project.ID)
		for _, m := range studio.ImportModes {
			res, err := b.store.ImportScript(ctx, b.editor.ID, b.project.ID, file, studio.ImportOpts{Mode: m, DryRun: true})
			require.NoError(t, err)
			require.NotEmpty(t, res.Actions)
			require.Equal(t, before, projectState(t, b.store, b.project.ID), string(m))
		}
	})
}

func TestImportScriptRefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 3)
	before := projectState(t, b.store, b.project.ID)
	bad := []studio.NewLine{
		{SourceLine: 1, StartMs: 0, EndMs: 1000, CharacterName: "New", Text: "fine"},
		{SourceLine: 4, StartMs: 2000, EndMs: 1000, Text: "backwards"},
		// NaN, which Go's parser reads from "nan", failed no range check: the vector
		// was stored, or the JSON encoder refused it with a 500.
		{SourceLine: 6, StartMs: 3000, EndMs: 4000, Text: "not a number", Emotion: "nan,0,0,0,0,0,0,0"},
	}
	for _, m := range studio.ImportModes {
		_, err := b.store.ImportScript(ctx, b.editor.ID, b.project.ID, bad, studio.ImportOpts{Mode: m})
		var ie *studio.ImportError
		require.ErrorAs(t, err, &ie)
		require.Len(t, ie.Problems, 2)
		require.Equal(t, 4, ie.Problems[0].Line)
		require.Equal(t, 6, ie.Problems[1].Line)
		require.Equal(t, "emotion.bad_vector", ie.Problems[1].Err.Key)
		require.Equal(t, before, projectState(t, b.store, b.project.ID))
	}
	for _, f := range []studio.FitSettings{
		{StretchMin: math.NaN(), StretchMax: 1.2, LoudnessLUFS: -23},
		{StretchMin: 0.9, StretchMax: 1.2, LoudnessLUFS: math.Inf(1)},
		{StretchMin: 0.9, StretchMax: 1.2, LoudnessLUFS: -23, MaxSpeedStep: math.NaN()},
	} {
		require.ErrorIs(t, f.Validate(), studio.ErrInvalid, "%+v", f)
	}
	require.ErrorIs(t, studio.Emotion{Mode: studio.EmotionAudio, AudioSHA256: "x", Weight: math.NaN()}.Validate(), studio.ErrInvalid)
	_, err := b.store.ImportScript(ctx, b.editor.ID, b.project.ID, bad[:1], studio.ImportOpts{Mode: "overwrite"})
	require.ErrorIs(t, err, studio.ErrInvalid)

	// A replace while a line renders is refused, and rolls back.
	studiotest.Exec(t, b.store, "UPDATE lines SET state = 'queued' WHERE project_id = $1 AND idx = 2", b.project.ID)
	before = projectState(t, b.store, b.project.ID)
	_, err = b.store.ImportScript(ctx, b.editor.ID, b.project.ID, bad[:1], studio.ImportOpts{Mode: studio.ImportReplace})
	var ie *studio.ImportError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "import.replace_active", ie.Problems[0].Err.Key)
	require.Equal(t, before, projectState(t, b.store, b.project.ID))
}

// TestImportScriptInBulk merges a file into a project of hundreds of lines, as the
// set-based writes do them all at once: every other line rewritten (some of them done,
// one queued), the others unchanged, new lines between them naming new characters in
// two spellings, one out of time order. The preview reports exactly what the confirm
// then does; the confirm numbers every line by time, bumps the revisions and records
// the history of the changed and created lines only, sends changed lines that are not
// rendering back to draft, and runs the hook once per written line.
func TestImportScriptInBulk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 400
	b := setup(t, n) // line i+1 at i*2000 ms, 1500 ms long, Alice or Bob
	studiotest.Exec(t, b.store, "UPDATE lines SET state = 'done' WHERE project_id = $1 AND idx % 4 = 1", b.project.ID)
	studiotest.Exec(t, b.store, "UPDATE lines SET state = 'queued' WHERE project_id = $1 AND idx = 3", b.project.ID)
	project, err := b.store.AllLines(ctx, b.project.ID)
	require.NoError(t, err)

	var file []studio.NewLine
	for i, l := range project {
		nl := studio.NewLine{SourceLine: 10 * (i + 1), StartMs: l.StartMs, EndMs: l.EndMs, Text: l.Text}
		if i%2 == 0 {
			nl.Text = fmt.Sprintf("Rewritten %d", i+1)
		}
		file = append(file, nl)
		if i%100 == 50 {
			who := "Carol"
			if i > 100 {
				who = "CAROL"
			}
			file = append(file, studio.NewLine{SourceLine: 10*(i+1) + 5, StartMs: l.EndMs + 100, EndMs: l.EndMs + 400,
				CharacterName: who, Text: fmt.Sprintf("Between %d and %d", i+1, i+2), Emotion: "calm"})
		}
	}
	// A line after the first, last in the file; its name is new too.
	file = append(file, studio.NewLine{SourceLine: 99999, StartMs: 1600, EndMs: 1600, CharacterName: "Dave", Text: "At once"})

	before := projectState(t, b.store, b.project.ID)
	preview, err := b.store.ImportScript(ctx, b.editor.ID, b.project.ID, file, studio.ImportOpts{Mode: studio.ImportMerge, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, before, projectState(t, b.store, b.project.ID), "the preview changes nothing")

	type call struct {
		id             int64
		created        bool
		revision       int
		state          studio.LineState
		text, previous string
	}
	var calls []call
	b.store.LineChanged = func(_ context.Context, _ *sql.Tx, before, after *studio.Line) error {
		c := call{id: after.ID, created: before == nil, revision: after.Revision, state: after.State, text: after.Text}
		if before != nil {
			c.previous = before.Text
		}
		calls = append(calls, c)
		return nil
	}
	res, err := b.store.ImportScript(ctx, b.editor.ID, b.project.ID, file, studio.ImportOpts{Mode: studio.ImportMerge})
	b.store.LineChanged = nil
	require.NoError(t, err)
	require.Equal(t, preview, res, "the preview is what the confirm does")

	created := 4 + 1 // Carol's four lines and Dave's
	require.Equal(t, created, res.Lines)
	require.Equal(t, n/2, res.Updated)
	require.Equal(t, n/2, res.Unchanged)
	require.Equal(t, []string{"Carol", "Dave"}, res.CharactersCreated, "one character per name, in the file's order, spelt as first seen")
	require.Equal(t, 1, res.Flagged, "Dave's zero-length line")

	chars, err := b.store.Characters(ctx, b.project.ID)
	require.NoError(t, err)
	colors := map[string]string{}
	for _, c := range chars {
		colors[c.Name] = c.Color
	}
	require.Equal(t, studio.Palette[2], colors["Carol"], "the palette goes on after Alice and Bob")
	require.Equal(t, studio.Palette[3], colors["Dave"])

	after, err := b.store.AllLines(ctx, b.project.ID)
	require.NoError(t, err)
	require.Len(t, after, n+created)
	was := map[int64]studio.Line{}
	for _, l := range project {
		was[l.ID] = l
	}
	require.Equal(t, "At once", after[1].Text, "numbered by time, not by the file's order")
	updates, creates := 0, 0
	for i, l := range after {
		require.Equal(t, i+1, l.Idx)
		if i > 0 {
			require.LessOrEqual(t, after[i-1].StartMs, l.StartMs)
		}
		h, err := b.store.LineHistory(ctx, b.project.ID, l.ID)
		require.NoError(t, err)
		old, existed := was[l.ID]
		switch {
		case !existed:
			creates++
			require.Equal(t, 1, l.Revision)
			require.Equal(t, studio.StateDraft, l.State)
			require.Len(t, h, 1)
			require.Equal(t, "import", h[0].Action)
			require.Nil(t, h[0].Before)
			require.Equal(t, l.Text, h[0].After.Text)
			if l.Text != "At once" {
				require.Equal(t, studio.EmotionText, l.Emotion.Mode)
				require.Equal(t, "calm", h[0].After.Emotion.Text)
			}
		case old.Text != l.Text:
			updates++
			require.Equal(t, old.Revision+1, l.Revision)
			require.Equal(t, l.Revision, l.AudibleRevision)
			require.Equal(t, old.CharacterID, l.CharacterID, "a file without names keeps the characters")
			if old.State == studio.StateQueued {
				require.Equal(t, studio.StateQueued, l.State, "a rendering line keeps its state")
			} else {
				require.Equal(t, studio.StateDraft, l.State, "a changed line goes back to draft")
			}
			require.Len(t, h, 2)
			require.Equal(t, "import", h[0].Action)
			require.Equal(t, old.Text, h[0].Before.Text)
			require.Equal(t, l.Text, h[0].After.Text)
		default:
			require.Equal(t, old.Revision, l.Revision)
			require.Equal(t, old.State, l.State)
			require.Len(t, h, 1, "an unchanged line's history is its first import")
		}
	}
	require.Equal(t, n/2, updates)
	require.Equal(t, created, creates)

	require.Len(t, calls, n/2+created, "the hook runs once per written line")
	for _, c := range calls {
		l := was[c.id]
		if c.created {
			require.Equal(t, 1, c.revision)
			continue
		}
		require.Equal(t, l.Text, c.previous)
		require.Equal(t, l.Revision+1, c.revision)
		require.NotEqual(t, c.previous, c.text)
	}
}
