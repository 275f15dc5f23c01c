package studio_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/i18n"
	"dubstudio/studio"
	"dubstudio/studio/script"
	"dubstudio/studio/studiotest"
)

type testBundle struct {
	store   *studio.Store
	editor  *studio.User
	project *studio.Project
}

func setup(t *testing.T, lines int) *testBundle {
	t.Helper()
	s := studiotest.Store(t)
	u := studiotest.User(t, s, studio.RoleEditor)
	return &testBundle{store: s, editor: u, project: studiotest.Project(t, s, u, lines)}
}

func ptr[T any](v T) *T { return &v }

func TestImportCreatesCharactersAndFlags(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	ctx := context.Background()
	res, err := b.store.ImportLines(ctx, b.editor.ID, b.project.ID, []studio.NewLine{
		{SourceLine: 1, StartMs: 0, EndMs: 1000, CharacterName: "Alice", Text: "Hi"},
		{SourceLine: 5, StartMs: 900, EndMs: 2000, CharacterName: "alice", Text: "Overlaps"},
		{SourceLine: 9, StartMs: 2500, EndMs: 2500, CharacterName: "Bob", Text: "Zero", Emotion: "0.1,0,0,0,0,0,0,0.2"},
	})
	require.NoError(t, err)
	require.Equal(t, 3, res.Lines)
	require.Equal(t, []string{"Alice", "Bob"}, res.CharactersCreated)
	require.Equal(t, 2, res.Flagged)

	page, err := b.store.Lines(ctx, b.project.ID, studio.LineFilter{})
	require.NoError(t, err)
	require.Len(t, page.Lines, 3)
	require.Equal(t, []int{1, 2, 3}, []int{page.Lines[0].Idx, page.Lines[1].Idx, page.Lines[2].Idx})
	require.Empty(t, page.Lines[0].Flags)
	require.True(t, page.Lines[1].Flags.Has(studio.FlagOverlap))
	require.True(t, page.Lines[2].Flags.Has(studio.FlagZeroLength))
	require.Equal(t, studio.EmotionVector, page.Lines[2].Emotion.Mode)
	require.Equal(t, 900, page.Lines[1].StartMs, "flagged, not changed")
}

func TestImportIsAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	ctx := context.Background()
	_, err := b.store.ImportLines(ctx, b.editor.ID, b.project.ID, []studio.NewLine{
		{SourceLine: 1, StartMs: 0, EndMs: 1000, CharacterName: "New", Text: "fine"},
		{SourceLine: 4, StartMs: 0, EndMs: 1000, Text: "bad \x00 control"},
		{SourceLine: 7, StartMs: 2000, EndMs: 1000, Text: "backwards"},
	})
	var ie *studio.ImportError
	require.ErrorAs(t, err, &ie)
	require.Len(t, ie.Problems, 2)
	require.Equal(t, 4, ie.Problems[0].Line)
	require.Equal(t, 7, ie.Problems[1].Line)
	page, err := b.store.Lines(ctx, b.project.ID, studio.LineFilter{})
	require.NoError(t, err)
	require.EqualValues(t, 2, page.Total, "nothing imported")
	chars, err := b.store.Characters(ctx, b.project.ID)
	require.NoError(t, err)
	require.Len(t, chars, 2, "no character created")
}

func TestStaleSaveIsRefusedWithTheOtherChange(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	ctx := context.Background()
	other := studiotest.User(t, b.store, studio.RoleEditor)
	page, _ := b.store.Lines(ctx, b.project.ID, studio.LineFilter{})
	l := page.Lines[0]

	saved, err := b.store.UpdateLine(ctx, other.ID, b.project.ID, l.ID, studio.LineEdit{BaseRevision: l.Revision, Text: ptr("Theirs")})
	require.NoError(t, err)
	require.Equal(t, l.Revision+1, saved.Revision)

	_, err = b.store.UpdateLine(ctx, b.editor.ID, b.project.ID, l.ID, studio.LineEdit{BaseRevision: l.Revision, Text: ptr("Mine")})
	var ce *studio.ConflictError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, studio.ErrConflict)
	require.Equal(t, "Theirs", ce.Current.Text)
	require.Equal(t, other.ID, ce.By.ID)

	cur, err := b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, "Theirs", cur.Text, "never silently overwritten")

	hist, err := b.store.LineHistory(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Len(t, hist, 2) // import + edit
	require.Equal(t, "edit", hist[0].Action)
	require.Equal(t, "Theirs", hist[0].After.Text)
	require.Equal(t, l.Text, hist[0].Before.Text)
	require.Equal(t, other.Username, hist[0].UserName)
}

func TestConcurrentSavesOfOneRevisionOnlyOneWins(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	ctx := context.Background()
	page, _ := b.store.Lines(ctx, b.project.ID, studio.LineFilter{})
	l := page.Lines[0]
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.store.UpdateLine(ctx, b.editor.ID, b.project.ID, l.ID, studio.LineEdit{BaseRevision: l.Revision, Notes: ptr("n")})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else {
			require.ErrorIs(t, err, studio.ErrConflict, "%v", err)
		}
	}
	require.Equal(t, 1, ok)
}

func TestSplitAndMerge(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	ctx := context.Background()
	page, _ := b.store.Lines(ctx, b.project.ID, studio.LineFilter{})
	l := page.Lines[0] // 0..1500 ms
	first, second, err := b.store.SplitLine(ctx, b.editor.ID, b.project.ID, l.ID, l.Revision, 4, 600)
	require.NoError(t, err)
	require.Equal(t, "Line", first.Text)
	require.Equal(t, 600, first.EndMs)
	require.Equal(t, 600, second.StartMs)
	require.Equal(t, 1500, second.EndMs)
	require.Equal(t, 2, second.Idx)

	page, err = b.store.Lines(ctx, b.project.ID, studio.LineFilter{})
	require.NoError(t, err)
	require.Len(t, page.Lines, 4)
	for i, x := range page.Lines {
		require.Equal(t, i+1, x.Idx, "indices stay dense")
	}

	merged, err := b.store.MergeLines(ctx, b.editor.ID, b.project.ID, first.ID, first.Revision)
	require.NoError(t, err)
	require.Equal(t, l.Text, merged.Text)
	require.Equal(t, 1500, merged.EndMs)
	page, err = b.store.Lines(ctx, b.project.ID, studio.LineFilter{})
	require.NoError(t, err)
	require.Len(t, page.Lines, 3)
	require.Equal(t, []int{1, 2, 3}, []int{page.Lines[0].Idx, page.Lines[1].Idx, page.Lines[2].Idx})

	_, _, err = b.store.SplitLine(ctx, b.editor.ID, b.project.ID, merged.ID, merged.Revision, 0, 0)
	require.ErrorIs(t, err, studio.ErrInvalid)
}

func TestFilterAndSearch(t *testing.T) {
	t.Parallel()
	b := setup(t, 30)
	ctx := context.Background()
	chars, _ := b.store.Characters(ctx, b.project.ID)
	bob := chars[1]
	require.Equal(t, "Bob", bob.Name)

	page, err := b.store.Lines(ctx, b.project.ID, studio.LineFilter{CharacterID: bob.ID, PerPage: 10})
	require.NoError(t, err)
	require.EqualValues(t, 15, page.Total)
	require.Len(t, page.Lines, 10)
	require.Equal(t, 2, page.Pages())

	page, err = b.store.Lines(ctx, b.project.ID, studio.LineFilter{Query: "number 2,"})
	require.NoError(t, err)
	require.EqualValues(t, 1, page.Total)

	page, err = b.store.Lines(ctx, b.project.ID, studio.LineFilter{Query: "%"})
	require.NoError(t, err)
	require.EqualValues(t, 0, page.Total, "LIKE wildcards are literal")

	all, _ := b.store.Lines(ctx, b.project.ID, studio.LineFilter{PerPage: 4})
	ids := []int64{all.Lines[0].ID, all.Lines[1].ID, all.Lines[2].ID}
	n, err := b.store.AssignCharacter(ctx, b.editor.ID, b.project.ID, ids, &bob.ID)
	require.NoError(t, err)
	require.Equal(t, 2, n, "line 2 was Bob's already")
	got, _ := b.store.LinesByIDs(ctx, b.project.ID, ids)
	for _, l := range got {
		require.Equal(t, bob.ID, *l.CharacterID)
	}
	require.Equal(t, all.Lines[0].Revision+1, got[0].Revision)

	other := studiotest.Project(t, b.store, b.editor, 1)
	otherChars, _ := b.store.Characters(ctx, other.ID)
	_, err = b.store.AssignCharacter(ctx, b.editor.ID, b.project.ID, ids, &otherChars[0].ID)
	require.ErrorIs(t, err, studio.ErrInvalid, "a character of another project is refused")
}

// TestLineLengthIsCapped: a three-hour cue is a valid SRT cue, but rendering it held
// gigabytes; import, edit and merge refuse a line longer than Limits.MaxLineMs with
// the line's number and both lengths, and change nothing.
func TestLineLengthIsCapped(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	ctx := context.Background()
	_, err := b.store.ImportLines(ctx, b.editor.ID, b.project.ID, []studio.NewLine{
		{SourceLine: 3, StartMs: 0, EndMs: 1000, Text: "fine"},
		{SourceLine: 9, StartMs: 1000, EndMs: 1000 + 3*3600_000, Text: "three hours"},
	})
	var ie *studio.ImportError
	require.ErrorAs(t, err, &ie)
	require.Len(t, ie.Problems, 1)
	require.Equal(t, 9, ie.Problems[0].Line)
	require.Equal(t, "line.too_long", ie.Problems[0].Err.Key)
	require.Contains(t, ie.Problems[0].Err.Error(), "10800 s")
	require.Contains(t, ie.Problems[0].Err.Error(), "MAX_LINE_SECONDS")
	page, err := b.store.Lines(ctx, b.project.ID, studio.LineFilter{})
	require.NoError(t, err)
	require.EqualValues(t, 2, page.Total, "nothing imported")

	// At the cap is accepted; one millisecond past it is not.
	b.store.Limits.MaxLineMs = 5000
	_, err = b.store.ImportLines(ctx, b.editor.ID, b.project.ID, []studio.NewLine{{SourceLine: 1, StartMs: 10_000, EndMs: 15_000, Text: "at the cap"}})
	require.NoError(t, err)
	l := page.Lines[0]
	_, err = b.store.UpdateLine(ctx, b.editor.ID, b.project.ID, l.ID, studio.LineEdit{BaseRevision: l.Revision, EndMs: ptr(l.StartMs + 5001)})
	var fe studio.FieldsError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "line.too_long", fe["end"].Key)
	got, err := b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, l.EndMs, got.EndMs, "the edit changed nothing")

	// Merging two lines that together pass the cap is refused and keeps both.
	next := page.Lines[1]
	_, err = b.store.UpdateLine(ctx, b.editor.ID, b.project.ID, next.ID, studio.LineEdit{BaseRevision: next.Revision, EndMs: ptr(l.StartMs + 5001)})
	require.NoError(t, err, "the second line alone is under the cap")
	_, err = b.store.MergeLines(ctx, b.editor.ID, b.project.ID, l.ID, l.Revision)
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "line.too_long", fe["merge"].Key)
	page, err = b.store.Lines(ctx, b.project.ID, studio.LineFilter{})
	require.NoError(t, err)
	require.EqualValues(t, 3, page.Total, "nothing merged")
}

// TestExportOfALongProgrammeIsRefused: a project whose last line ends past
// Limits.MaxExportMs gets no export (and no job), with both lengths in the message.
func TestExportOfALongProgrammeIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	ctx := context.Background()
	page, err := b.store.Lines(ctx, b.project.ID, studio.LineFilter{})
	require.NoError(t, err)
	last := page.Lines[len(page.Lines)-1]
	b.store.Limits.MaxExportMs = last.EndMs - 1
	queued := 0
	queue := func(context.Context, *sql.Tx, *studio.Export) error { queued++; return nil }
	_, err = b.store.CreateExport(ctx, b.project.ID, b.editor.ID, studio.ExportOptions{}, queue)
	require.ErrorIs(t, err, studio.ErrInvalid)
	var ie *i18n.Error
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "export.too_long", ie.Key)
	require.Contains(t, ie.Error(), "MAX_EXPORT_SECONDS")
	require.Zero(t, queued)
	exports, err := b.store.Exports(ctx, b.project.ID)
	require.NoError(t, err)
	require.Empty(t, exports)

	b.store.Limits.MaxExportMs = last.EndMs
	_, err = b.store.CreateExport(ctx, b.project.ID, b.editor.ID, studio.ExportOptions{}, queue)
	require.NoError(t, err, "a programme at the limit is exported")
	require.Equal(t, 1, queued)

	// The database takes every frame rate an export offers, and gives it back.
	for _, fps := range script.FrameRates() {
		e, err := b.store.CreateExport(ctx, b.project.ID, b.editor.ID, studio.ExportOptions{FPS: fps}, queue)
		require.NoError(t, err, fps)
		got, err := b.store.Export(ctx, b.project.ID, e.ID)
		require.NoError(t, err)
		require.Equal(t, fps, got.FPS)
	}
}

// TestCSVCellNeutralisesFormulas: manifest cells starting with a formula character
// were written verbatim, for a spreadsheet to run.
func TestCSVCellNeutralisesFormulas(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"=HYPERLINK(\"http://x\")": "'=HYPERLINK(\"http://x\")", "+1": "'+1", "-2+3": "'-2+3", "@SUM(A1)": "'@SUM(A1)",
		"\tx": "'\tx", "\rx": "'\rx", "Hello": "Hello", "": "", "a=b": "a=b",
	} {
		require.Equal(t, want, studio.CSVCell(in), "%q", in)
	}
}
