package studio_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// TestAMoveKeepsTheTakeThatStillFits: a finished line moved in time with its length
// kept keeps its take, its approval and its place in an export: the synthesis aimed
// at the slot's length. A move that leaves less of the gap after it than the take
// borrowed is no exception: the take is named to the GapsChanged hook
// (OverrunTakes), which fits it again (workflow's
// TestAChangeOfTheSlotsFitsOverrunTakesAgain). A change of length or a move with an
// edit send the line back to draft.
func TestAMoveKeepsTheTakeThatStillFits(t *testing.T) {
	t.Parallel()
	b := setup(t, 4) // slots 0–1500, 2000–3500, 4000–5500, 6000–7500 ms
	ctx := context.Background()
	bs := studio.BlobStore{Dir: t.TempDir()}
	lines, err := b.store.AllLines(ctx, b.project.ID)
	require.NoError(t, err)
	first := studiotest.Take(t, b.store, bs, t.TempDir(), lines[0], 1700*48, 0, 440) // 200 ms borrowed
	require.Equal(t, 200, first.BorrowedMs)
	_, err = b.store.ApproveTakeAs(ctx, b.editor.ID, b.project.ID, first.ID)
	require.NoError(t, err)
	third := studiotest.Take(t, b.store, bs, t.TempDir(), lines[2], 1500*48, 0, 550) // fits its slot

	move := func(l studio.Line, by int, e studio.LineEdit) *studio.Line {
		t.Helper()
		cur, err := b.store.Line(ctx, b.project.ID, l.ID)
		require.NoError(t, err)
		e.BaseRevision = cur.Revision
		e.StartMs, e.EndMs = ptr(cur.StartMs+by), ptr(cur.EndMs+by)
		saved, err := b.store.UpdateLine(ctx, b.editor.ID, b.project.ID, l.ID, e)
		require.NoError(t, err)
		return saved
	}
	kept := func(l *studio.Line, tk *studio.Take) {
		t.Helper()
		require.Equal(t, studio.StateDone, l.State)
		require.Equal(t, tk.ID, *l.CurrentTakeID)
		require.Less(t, l.AudibleRevision, l.Revision, "the move is not a change to what it sounds like")
	}
	toDraft := func(l *studio.Line) {
		t.Helper()
		require.Equal(t, studio.StateDraft, l.State)
		require.Equal(t, l.Revision, l.AudibleRevision)
	}

	// 200–1700: 300 ms free before line 2, the take borrowed 200.
	l := move(lines[0], 200, studio.LineEdit{})
	kept(l, first)
	require.Equal(t, first.ID, *l.ApprovedTakeID, "and its approval")
	out, _, err := b.store.ExportLines(ctx, b.project.ID, true, false)
	require.NoError(t, err)
	require.Len(t, out, 1, "the approved take is exported, not stale")
	require.Equal(t, 200, out[0].Line.StartMs, "at the line's new place")
	require.False(t, out[0].Stale())

	// 400–1900: 100 ms free, less than the take ran into: kept, and named to the hook
	// as overrunning; the line after it, which borrowed nothing, is not.
	var over [][]studio.Overrun
	b.store.GapsChanged = func(ctx context.Context, tx *sql.Tx, projectID int64, lineIDs []int64) error {
		o, err := b.store.OverrunTakes(ctx, tx, projectID, lineIDs)
		over = append(over, o)
		return err
	}
	kept(move(lines[0], 200, studio.LineEdit{}), first)
	require.Len(t, over, 1, "the hook ran once, for the one change")
	require.Len(t, over[0], 1)
	require.Equal(t, lines[0].ID, over[0][0].Take.LineID)
	require.Equal(t, first.ID, over[0][0].Take.ID)
	require.Equal(t, first.AudioSHA256, over[0][0].Take.AudioSHA256, "the whole take")
	require.Equal(t, 200, over[0][0].Take.BorrowedMs)
	require.Equal(t, first.RenderSeq, over[0][0].RenderSeq, "and the line's render")
	b.store.GapsChanged = nil

	// Line 3 to 4500–6000, ending where line 4 starts: its take borrowed nothing.
	kept(move(lines[2], 500, studio.LineEdit{}), third)
	// Back by 40 ms and 40 ms longer: the length changed.
	cur, err := b.store.Line(ctx, b.project.ID, lines[2].ID)
	require.NoError(t, err)
	l, err = b.store.UpdateLine(ctx, b.editor.ID, b.project.ID, lines[2].ID,
		studio.LineEdit{BaseRevision: cur.Revision, StartMs: ptr(cur.StartMs - 40)})
	require.NoError(t, err)
	toDraft(l)

	// A move with a new text is an edit like any other.
	second := studiotest.Take(t, b.store, bs, t.TempDir(), lines[1], 1500*48, 0, 660)
	l = move(lines[1], 100, studio.LineEdit{Text: ptr("Said otherwise.")})
	toDraft(l)
	require.Equal(t, second.ID, *l.CurrentTakeID, "its take stays in its list")
}
