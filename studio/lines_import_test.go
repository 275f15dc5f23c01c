package studio_test

import (
	"context"
	"fmt"
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
	}
	for _, m := range studio.ImportModes {
		_, err := b.store.ImportScript(ctx, b.editor.ID, b.project.ID, bad, studio.ImportOpts{Mode: m})
		var ie *studio.ImportError
		require.ErrorAs(t, err, &ie)
		require.Equal(t, 4, ie.Problems[0].Line)
		require.Equal(t, before, projectState(t, b.store, b.project.ID))
	}
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
