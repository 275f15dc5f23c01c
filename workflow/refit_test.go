package workflow_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/tts"
)

// longEngine speaks every line 300 ms longer than its slot, so that each take borrows
// of the gap after it, and counts its syntheses.
type longEngine struct {
	tts.Engine
	calls atomic.Int64
}

func (e *longEngine) Synthesize(ctx context.Context, req tts.Request) (tts.Result, error) {
	e.calls.Add(1)
	req.TargetSeconds += 0.3
	req.DurationFactor = 0
	return e.Engine.Synthesize(ctx, req)
}

// TestAChangeOfTheSlotsFitsOverrunTakesAgain: a change of the slots that leaves a
// finished take running into the next line (the next line moved into its borrowed
// tail, or the line itself moved up to the next) fits that take again from its raw
// audio, with no new synthesis: a new take that names the old one, fits the gap as
// it now is and needs approving again; a move that leaves room keeps the take.
func TestAChangeOfTheSlotsFitsOverrunTakesAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, 3) // slots 0–1500, 2000–3500, 4000–5500 ms
	ctx := context.Background()
	eng := &longEngine{Engine: simulator(t)}
	b.startWorker(t, workerOpts{engine: eng, permits: 2})
	_, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	b.WaitSettled(t, time.Minute)
	require.EqualValues(t, 3, eng.calls.Load())
	lines := b.Lines(t)
	takeOf := func(l studio.Line) *studio.Take {
		t.Helper()
		require.NotNil(t, l.CurrentTakeID, "line %d has a take", l.Idx)
		tk, err := b.Store.Take(ctx, b.Project.ID, *l.CurrentTakeID)
		require.NoError(t, err)
		return tk
	}
	first, second := takeOf(lines[0]), takeOf(lines[1])
	require.Positive(t, first.BorrowedMs, "the first take runs into the gap after it")
	require.NotNil(t, first.RawSHA256)
	_, err = b.Store.ApproveTakeAs(ctx, b.Editor.ID, b.Project.ID, first.ID)
	require.NoError(t, err)

	move := func(l studio.Line, startMs int) *studio.Line {
		t.Helper()
		cur, err := b.Store.Line(ctx, b.Project.ID, l.ID)
		require.NoError(t, err)
		end := startMs + cur.DurationMs()
		saved, err := b.Store.UpdateLine(ctx, b.Editor.ID, b.Project.ID, l.ID,
			studio.LineEdit{BaseRevision: cur.Revision, StartMs: &startMs, EndMs: &end})
		require.NoError(t, err)
		return saved
	}
	reread := func(l studio.Line) studio.Line {
		t.Helper()
		cur, err := b.Store.Line(ctx, b.Project.ID, l.ID)
		require.NoError(t, err)
		return *cur
	}
	refitOf := func(l studio.Line, old *studio.Take, gapMs int) *studio.Take {
		t.Helper()
		require.Contains(t, []studio.LineState{studio.StateDone, studio.StateNeedsReview}, l.State)
		tk := takeOf(l)
		require.NotEqual(t, old.ID, tk.ID, "line %d has a new take", l.Idx)
		require.NotNil(t, tk.RefitOf)
		require.Equal(t, old.ID, *tk.RefitOf, "fitted again from the old take")
		require.Equal(t, *old.RawSHA256, *tk.RawSHA256, "from its raw audio")
		require.Equal(t, old.Seed, tk.Seed)
		require.LessOrEqual(t, tk.BorrowedMs, gapMs, "it fits the gap as it now is")
		return tk
	}

	// The second line to start 100 ms before the first take's tail ends: the gap
	// after the first line is now shorter than what its take borrowed.
	gap := first.BorrowedMs - 100
	moved := move(lines[1], 1500+gap)
	require.Equal(t, second.ID, *moved.CurrentTakeID, "the moved line keeps its take")
	b.WaitSettled(t, time.Minute)
	l1 := reread(lines[0])
	refit := refitOf(l1, first, gap)
	require.Nil(t, l1.ApprovedTakeID, "the approval was of the take that ran into the next line")
	l2 := reread(lines[1])
	require.Equal(t, second.ID, *l2.CurrentTakeID, "the moved line's take still fits: kept")
	require.EqualValues(t, 3, eng.calls.Load(), "no synthesis")

	// The second line up to 100 ms before the third: its own tail no longer fits.
	require.Greater(t, second.BorrowedMs, 100)
	move(lines[1], 4000-100-l2.DurationMs())
	b.WaitSettled(t, time.Minute)
	refitOf(reread(lines[1]), second, 100)
	require.EqualValues(t, 3, eng.calls.Load(), "no synthesis")
	require.Equal(t, refit.ID, *reread(lines[0]).CurrentTakeID, "the first line now has room: left alone")

	// An imported line that starts in the first line's borrowed tail: fitted again,
	// from the same raw audio.
	require.Greater(t, refit.BorrowedMs, 100)
	_, err = b.Store.ImportLines(ctx, b.Editor.ID, b.Project.ID, []studio.NewLine{
		{SourceLine: 9, StartMs: 1600, EndMs: 1900, CharacterName: "Bob", Text: "Wait."}})
	require.NoError(t, err)
	b.WaitSettled(t, time.Minute)
	again := refitOf(reread(lines[0]), refit, 100)
	require.Equal(t, *first.RawSHA256, *again.RawSHA256)
	require.EqualValues(t, 3, eng.calls.Load(), "no synthesis")

	// A refit is no synthesis: the histogram of syntheses counts the three.
	n, _, _, err := b.Store.SynthesisHistogram(ctx, []float64{1})
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
}
