package workflow_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/audio"
	"dubstudio/studio"
	"dubstudio/studio/script"
	"dubstudio/tts"
	"dubstudio/workflow"
)

func TestRenderProjectWithEspeak(t *testing.T) {
	t.Parallel()
	b := setup(t, 6)
	ctx := context.Background()
	b.startWorker(t, workerOpts{})
	n, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	require.Equal(t, 6, n)
	counts := b.WaitSettled(t, 2*time.Minute)
	require.Equal(t, 6, counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)

	blobs := studio.BlobStore{Dir: b.DataDir + "/blobs"}
	for _, l := range b.Lines(t) {
		require.NotNil(t, l.CurrentTakeID, "line %d", l.Idx)
		takes, err := b.Store.Takes(ctx, b.Project.ID, l.ID)
		require.NoError(t, err)
		require.Len(t, takes, 1)
		tk := takes[0]
		require.Equal(t, "espeak", tk.Engine)
		require.True(t, tk.Deterministic, "espeak-ng's take records that a new seed would change nothing")
		require.NotEmpty(t, tk.ModelVersion)
		require.Equal(t, l.Text, tk.SpokenText)
		require.Positive(t, tk.SynthMs+tk.FitMs)
		require.Greater(t, tk.RTF, 0.0)
		path, err := blobs.Path(tk.AudioSHA256)
		require.NoError(t, err)
		pcm, err := audio.ReadWAVFile(path)
		require.NoError(t, err)
		require.Equal(t, 48000, pcm.SampleRate)
		slot := audio.SamplesFor(l.DurationMs()+tk.BorrowedMs, 48000)
		require.InDelta(t, slot, pcm.Frames(), 1, "line %d is exactly its slot", l.Idx)
		if l.State == studio.StateDone {
			require.GreaterOrEqual(t, tk.StretchRatio, b.Project.StretchMin-1e-9)
			require.LessOrEqual(t, tk.StretchRatio, b.Project.StretchMax+1e-9)
		} else {
			require.True(t, tk.NeedsReview)
			require.NotNil(t, tk.Hint)
		}
	}
}

func TestEditWhileQueuedMakesTheOldJobStale(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	ctx := context.Background()
	_, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	l := b.Lines(t)[0]
	require.Equal(t, studio.StateQueued, l.State)
	first := l.RenderSeq

	// Edited before any worker ran: the queued job is now stale and a new one queued.
	text := "A new text for the first line."
	saved, err := b.Store.UpdateLine(ctx, b.Editor.ID, b.Project.ID, l.ID, studio.LineEdit{BaseRevision: l.Revision, Text: &text})
	require.NoError(t, err)
	require.Equal(t, studio.StateQueued, saved.State)
	after, _ := b.Store.Line(ctx, b.Project.ID, l.ID)
	require.Equal(t, first+1, after.RenderSeq)

	// A notes-only edit does not restart the render.
	notes := "breathier"
	_, err = b.Store.UpdateLine(ctx, b.Editor.ID, b.Project.ID, l.ID, studio.LineEdit{BaseRevision: after.Revision, Notes: &notes})
	require.NoError(t, err)
	again, _ := b.Store.Line(ctx, b.Project.ID, l.ID)
	require.Equal(t, after.RenderSeq, again.RenderSeq)

	b.startWorker(t, workerOpts{})
	b.WaitSettled(t, 2*time.Minute)
	takes, err := b.Store.Takes(ctx, b.Project.ID, l.ID)
	require.NoError(t, err)
	require.Len(t, takes, 1, "the stale job wrote no take")
	require.Equal(t, text, takes[0].SpokenText)
	require.Equal(t, after.RenderSeq, takes[0].RenderSeq)
}

func TestRenderRequestsAreUnique(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	ctx := context.Background()
	n, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	// Asking again while they are queued queues nothing more.
	n, err = b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	require.Zero(t, n)
	l := b.Lines(t)[0]
	n, err = b.Pipeline.RenderLines(ctx, b.Project.ID, []int64{l.ID})
	require.NoError(t, err)
	require.Zero(t, n, "a line being rendered is not queued twice")

	var jobs int
	require.NoError(t, b.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'synthesize_line'`).Scan(&jobs))
	require.Equal(t, 3, jobs)

	// The same render inserted twice (a client retrying) is one job.
	_, err = b.Store.Pool().Exec(ctx, `SELECT 1`)
	require.NoError(t, err)
	dup, err := workflow.InsertForTest(ctx, b.Pipeline, workflow.SynthesizeArgs{LineID: l.ID, RenderSeq: l.RenderSeq, ProjectID: b.Project.ID})
	require.NoError(t, err)
	require.True(t, dup, "the duplicate is skipped")
}

func TestCancelStopsTheRender(t *testing.T) {
	t.Parallel()
	b := setup(t, 5)
	ctx := context.Background()
	_, err := b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	n, err := b.Pipeline.Cancel(ctx, b.Project.ID)
	require.NoError(t, err)
	require.Equal(t, 5, n)
	b.startWorker(t, workerOpts{})
	counts := b.WaitSettled(t, time.Minute)
	require.Equal(t, 5, counts[studio.StateCancelled])
	var takes int
	require.NoError(t, b.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM takes`).Scan(&takes))
	require.Zero(t, takes)
}

func TestGlossaryIsSpoken(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	ctx := context.Background()
	_, err := b.Store.ImportLines(ctx, b.Editor.ID, b.Project.ID, []studio.NewLine{
		{SourceLine: 1, StartMs: 0, EndMs: 3000, CharacterName: "Ann", Text: "NASA called Ann."}})
	require.NoError(t, err)
	require.NoError(t, b.Store.AddGlossaryEntry(ctx, b.Project.ID, "NASA", "nasa"))
	b.startWorker(t, workerOpts{})
	_, err = b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	b.WaitSettled(t, time.Minute)
	l := b.Lines(t)[0]
	takes, err := b.Store.Takes(ctx, b.Project.ID, l.ID)
	require.NoError(t, err)
	require.Len(t, takes, 1)
	require.Equal(t, "nasa called Ann.", takes[0].SpokenText, "the take records what the engine was asked to say")
}

// TestRenderRealSubtitleFile renders a real subtitle file (UTF-8 with BOM, CRLF) with
// the espeak-ng engine: every take is exactly its slot's length (plus what it
// borrowed of the next gap), within the stretch limits, or marked needs review.
func TestRenderRealSubtitleFile(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	ctx := context.Background()
	data, err := os.ReadFile("testdata/night_kitchen.srt")
	require.NoError(t, err)
	cues, err := script.Parse("night_kitchen.srt", data)
	require.NoError(t, err)
	lines := make([]studio.NewLine, len(cues))
	for i, c := range cues {
		lines[i] = studio.NewLine{SourceLine: c.SourceLine, StartMs: int(c.Start.Milliseconds()), EndMs: int(c.End.Milliseconds()),
			CharacterName: c.Character, Text: c.Text}
	}
	_, err = b.Store.ImportLines(ctx, b.Editor.ID, b.Project.ID, lines)
	require.NoError(t, err)
	b.startWorker(t, workerOpts{})
	_, err = b.Pipeline.RenderPending(ctx, b.Project.ID)
	require.NoError(t, err)
	counts := b.WaitSettled(t, 3*time.Minute)
	require.Equal(t, len(cues), counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)

	blobs := studio.BlobStore{Dir: b.DataDir + "/blobs"}
	for _, l := range b.Lines(t) {
		tk, err := b.Store.Take(ctx, b.Project.ID, *l.CurrentTakeID)
		require.NoError(t, err)
		path, _ := blobs.Path(tk.AudioSHA256)
		pcm, err := audio.ReadWAVFile(path)
		require.NoError(t, err)
		want := audio.SamplesFor(l.DurationMs()+tk.BorrowedMs, pcm.SampleRate)
		require.InDelta(t, want, pcm.Frames(), 1, "line %d: %q", l.Idx, l.Text)
		if tk.NeedsReview {
			require.Equal(t, studio.StateNeedsReview, l.State)
			require.Greater(t, tk.NeededRatio, b.Project.StretchMax)
		} else {
			require.Equal(t, studio.StateDone, l.State)
			require.GreaterOrEqual(t, tk.StretchRatio, b.Project.StretchMin-1e-9)
			require.LessOrEqual(t, tk.StretchRatio, b.Project.StretchMax+1e-9)
		}
	}
}

// firstEngine records, by text, whether each synthesis was marked first.
type firstEngine struct {
	tts.Engine
	mu    sync.Mutex
	first map[string]bool
}

func (e *firstEngine) Synthesize(ctx context.Context, req tts.Request) (tts.Result, error) {
	e.mu.Lock()
	e.first[req.Text] = req.First
	e.mu.Unlock()
	return e.Engine.Synthesize(ctx, req)
}

// An editor's retake goes ahead of a project's bulk render: with eleven lines queued
// by a bulk request and the queue paused, a render of the twelfth alone is inserted
// at River priority 1 and started among the first jobs the worker fetches (it holds
// its permits plus two), not after the eleven. Its fit keeps the priority.
func TestARetakeGoesAheadOfTheBulkRender(t *testing.T) {
	t.Parallel()
	b := setup(t, 12)
	ctx := context.Background()
	require.NoError(t, b.Pipeline.PauseSynthesis(ctx))
	lines := b.Lines(t)
	var bulk []int64
	for _, l := range lines[:11] {
		bulk = append(bulk, l.ID)
	}
	n, err := b.Pipeline.RenderLines(ctx, b.Project.ID, bulk)
	require.NoError(t, err)
	require.Equal(t, 11, n)
	retake := lines[11].ID
	_, err = b.Pipeline.RenderLines(ctx, b.Project.ID, []int64{retake})
	require.NoError(t, err)

	type job struct {
		line      int64
		kind      string
		priority  int
		attempted *time.Time
	}
	jobs := func() []job {
		rows, err := b.Store.Pool().Query(ctx, `SELECT (args->>'line_id')::bigint, kind, priority, attempted_at
			FROM river_job WHERE (args->>'project_id')::bigint = $1 ORDER BY attempted_at NULLS LAST, id`, b.Project.ID)
		require.NoError(t, err)
		defer rows.Close()
		var out []job
		for rows.Next() {
			var j job
			require.NoError(t, rows.Scan(&j.line, &j.kind, &j.priority, &j.attempted))
			out = append(out, j)
		}
		require.NoError(t, rows.Err())
		return out
	}
	for _, j := range jobs() {
		want := workflow.PriorityBulk
		if j.line == retake {
			want = workflow.PriorityFirst
		}
		require.Equal(t, want, j.priority, "line %d", j.line)
	}

	// One permit and no concurrent fit: the worker's River client holds 1 + 1 + 1 jobs.
	eng := &firstEngine{Engine: simulator(t), first: map[string]bool{}}
	b.startWorkerWith(t, workflow.NewLocalPermits(eng, 1), func(c *workflow.WorkerConfig) { c.ConcurrentFits = 1 })
	require.NoError(t, b.Pipeline.ResumeSynthesis(ctx))
	counts := b.WaitSettled(t, 2*time.Minute)
	require.Equal(t, 12, counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)
	rank := -1
	var synth []job
	for _, j := range jobs() {
		if j.kind == (workflow.SynthesizeArgs{}).Kind() {
			synth = append(synth, j)
		}
		if j.line == retake && j.kind == (workflow.FitArgs{}).Kind() {
			require.Equal(t, workflow.PriorityFirst, j.priority, "the fit keeps the synthesis's priority")
		}
	}
	for i, j := range synth {
		if j.line == retake {
			rank = i
		}
	}
	require.Len(t, synth, 12)
	require.GreaterOrEqual(t, rank, 0)
	// The engine is told which line is the retake (a batching host runs it first).
	eng.mu.Lock()
	defer eng.mu.Unlock()
	require.Len(t, eng.first, 12)
	for _, l := range lines {
		require.Equal(t, l.ID == retake, eng.first[l.Text], "line %d", l.Idx)
	}
	require.Less(t, rank, 3, "the retake started among the first fetch, not after the bulk (order %v)", synth)
}
