package workflow_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/audio"
	"dubstudio/studio"
	"dubstudio/studio/script"
	"dubstudio/studio/studiotest"
	"dubstudio/tts"
	"dubstudio/workflow"
)

type testBundle struct {
	store    *studio.Store
	pipeline *workflow.Pipeline
	dataDir  string
	editor   *studio.User
	project  *studio.Project
}

func setup(t *testing.T, lines int) *testBundle {
	t.Helper()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng is not installed")
	}
	store := studiotest.Store(t)
	p, err := workflow.NewPipeline(store, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ed := studiotest.User(t, store, studio.RoleEditor)
	return &testBundle{store: store, pipeline: p, dataDir: t.TempDir(), editor: ed, project: studiotest.Project(t, store, ed, lines)}
}

type workerOpts struct {
	name   string
	engine tts.Engine
	slots  int
}

func (b *testBundle) startWorker(t *testing.T, o workerOpts) *workflow.Worker {
	t.Helper()
	if o.engine == nil {
		o.engine = tts.NewEspeak(tts.EspeakConfig{})
	}
	if o.name == "" {
		o.name = fmt.Sprintf("test-%d", time.Now().UnixNano())
	}
	return b.startWorkerWith(t, workflow.NewLocalPermits(o.engine, max(o.slots, 2)), func(c *workflow.WorkerConfig) {
		c.Name = o.name
		c.MaxAttempts = 0 // the worker's default
	})
}

// waitSettled waits until no line of the project is queued or running, failing the
// test if that does not happen within limit (a bound on a hang, not a timing claim).
func (b *testBundle) waitSettled(t *testing.T, limit time.Duration) studio.StateCounts {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		counts, err := b.store.ProjectStateCounts(context.Background(), []int64{b.project.ID})
		if err != nil {
			// A connection the test itself killed: the pool replaces it.
			require.True(t, time.Now().Before(deadline), "%v", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		c := counts[b.project.ID]
		active := 0
		for st, n := range c {
			if st.Active() {
				active += n
			}
		}
		if active == 0 {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("lines still active after %s: %v", limit, c)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *testBundle) lines(t *testing.T) []studio.Line {
	t.Helper()
	ls, err := b.store.AllLines(context.Background(), b.project.ID)
	require.NoError(t, err)
	return ls
}

func TestRenderProjectWithEspeak(t *testing.T) {
	t.Parallel()
	b := setup(t, 6)
	ctx := context.Background()
	b.startWorker(t, workerOpts{})
	n, err := b.pipeline.RenderPending(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, 6, n)
	counts := b.waitSettled(t, 2*time.Minute)
	require.Equal(t, 6, counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)

	blobs := studio.BlobStore{Dir: b.dataDir + "/blobs"}
	for _, l := range b.lines(t) {
		require.NotNil(t, l.CurrentTakeID, "line %d", l.Idx)
		takes, err := b.store.Takes(ctx, b.project.ID, l.ID)
		require.NoError(t, err)
		require.Len(t, takes, 1)
		tk := takes[0]
		require.Equal(t, "espeak", tk.Engine)
		require.NotEmpty(t, tk.ModelVersion)
		require.Equal(t, l.Text, tk.SpokenText)
		require.Greater(t, tk.SynthMs+tk.FitMs, 0)
		require.Greater(t, tk.RTF, 0.0)
		path, err := blobs.Path(tk.AudioSHA256)
		require.NoError(t, err)
		pcm, err := audio.ReadWAVFile(path)
		require.NoError(t, err)
		require.Equal(t, 48000, pcm.SampleRate)
		slot := audio.SamplesFor(l.DurationMs()+tk.BorrowedMs, 48000)
		require.InDelta(t, slot, pcm.Frames(), 1, "line %d is exactly its slot", l.Idx)
		if l.State == studio.StateDone {
			require.GreaterOrEqual(t, tk.StretchRatio, b.project.StretchMin-1e-9)
			require.LessOrEqual(t, tk.StretchRatio, b.project.StretchMax+1e-9)
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
	_, err := b.pipeline.RenderPending(ctx, b.project.ID)
	require.NoError(t, err)
	l := b.lines(t)[0]
	require.Equal(t, studio.StateQueued, l.State)
	first := l.RenderSeq

	// Edited before any worker ran: the queued job is now stale and a new one queued.
	text := "A new text for the first line."
	saved, err := b.store.UpdateLine(ctx, b.editor.ID, b.project.ID, l.ID, studio.LineEdit{BaseRevision: l.Revision, Text: &text})
	require.NoError(t, err)
	require.Equal(t, studio.StateQueued, saved.State)
	after, _ := b.store.Line(ctx, b.project.ID, l.ID)
	require.Equal(t, first+1, after.RenderSeq)

	// A notes-only edit does not restart the render.
	notes := "breathier"
	_, err = b.store.UpdateLine(ctx, b.editor.ID, b.project.ID, l.ID, studio.LineEdit{BaseRevision: after.Revision, Notes: &notes})
	require.NoError(t, err)
	again, _ := b.store.Line(ctx, b.project.ID, l.ID)
	require.Equal(t, after.RenderSeq, again.RenderSeq)

	b.startWorker(t, workerOpts{})
	b.waitSettled(t, 2*time.Minute)
	takes, err := b.store.Takes(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Len(t, takes, 1, "the stale job wrote no take")
	require.Equal(t, text, takes[0].SpokenText)
	require.Equal(t, after.RenderSeq, takes[0].RenderSeq)
}

func TestRenderRequestsAreUnique(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	ctx := context.Background()
	n, err := b.pipeline.RenderPending(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	// Asking again while they are queued queues nothing more.
	n, err = b.pipeline.RenderPending(ctx, b.project.ID)
	require.NoError(t, err)
	require.Zero(t, n)
	l := b.lines(t)[0]
	n, err = b.pipeline.RenderLines(ctx, b.project.ID, []int64{l.ID})
	require.NoError(t, err)
	require.Zero(t, n, "a line being rendered is not queued twice")

	var jobs int
	require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'synthesize_line'`).Scan(&jobs))
	require.Equal(t, 3, jobs)

	// The same render inserted twice (a client retrying) is one job.
	_, err = b.store.Pool().Exec(ctx, `SELECT 1`)
	require.NoError(t, err)
	dup, err := workflow.InsertForTest(ctx, b.pipeline, workflow.SynthesizeArgs{LineID: l.ID, RenderSeq: l.RenderSeq, ProjectID: b.project.ID})
	require.NoError(t, err)
	require.True(t, dup, "the duplicate is skipped")
}

func TestPermanentFailureFailsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	ctx := context.Background()
	l := b.lines(t)[0]
	empty := "   "
	_, err := b.store.UpdateLine(ctx, b.editor.ID, b.project.ID, l.ID, studio.LineEdit{BaseRevision: l.Revision, Text: &empty})
	require.NoError(t, err)
	b.startWorker(t, workerOpts{})
	_, err = b.pipeline.RenderPending(ctx, b.project.ID)
	require.NoError(t, err)
	counts := b.waitSettled(t, time.Minute)
	require.Equal(t, 1, counts[studio.StateFailed])
	got := b.lines(t)[0]
	require.Equal(t, 1, got.Attempts)
	require.Contains(t, got.LastError, "render.empty_text")

	// Fixed and retried from the failed list, it renders.
	fixed := "Now there is something to say."
	_, err = b.store.UpdateLine(ctx, b.editor.ID, b.project.ID, l.ID, studio.LineEdit{BaseRevision: got.Revision, Text: &fixed})
	require.NoError(t, err)
	n, err := b.pipeline.RetryFailed(ctx, b.project.ID)
	require.NoError(t, err)
	require.Zero(t, n, "the edit moved it back to draft")
	n, err = b.pipeline.RenderPending(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	counts = b.waitSettled(t, time.Minute)
	require.Equal(t, 1, counts[studio.StateDone]+counts[studio.StateNeedsReview])
}

// countingEngine counts how often the real engine computes speaker conditioning.
type countingEngine struct {
	tts.Engine
	prepared atomic.Int64
}

func (c *countingEngine) PrepareSpeaker(ctx context.Context, req tts.PrepareRequest) (tts.PrepareResult, error) {
	c.prepared.Add(1)
	return c.Engine.PrepareSpeaker(ctx, req)
}

func TestSpeakerConditioningOncePerCharacter(t *testing.T) {
	t.Parallel()
	b := setup(t, 12)
	ctx := context.Background()
	blobs := studio.BlobStore{Dir: b.dataDir + "/blobs"}
	chars, err := b.store.Characters(ctx, b.project.ID)
	require.NoError(t, err)
	for i, c := range chars {
		ref := fmt.Sprintf("%s/ref-%d.wav", t.TempDir(), i)
		out, err := exec.Command("espeak-ng", "-w", ref, fmt.Sprintf("This is the reference voice of %s.", c.Name)).CombinedOutput()
		require.NoError(t, err, string(out))
		blob, err := b.store.PutBlob(ctx, blobs, ref, studio.Blob{Format: "wav", DurationMs: 2000, SampleRate: 22050, Channels: 1})
		require.NoError(t, err)
		require.NoError(t, b.store.SetCharacterReference(ctx, b.project.ID, c.ID, blob.SHA256, "ref.wav"))
	}
	eng := &countingEngine{Engine: tts.NewEspeak(tts.EspeakConfig{})}
	b.startWorker(t, workerOpts{engine: eng, slots: 3})
	_, err = b.pipeline.RenderPending(ctx, b.project.ID)
	require.NoError(t, err)
	counts := b.waitSettled(t, 2*time.Minute)
	require.Equal(t, 12, counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)
	require.EqualValues(t, 2, eng.prepared.Load(), "once per character, not per line")

	// Regenerating every line computes nothing again.
	ids := []int64{}
	for _, l := range b.lines(t) {
		ids = append(ids, l.ID)
	}
	_, err = b.pipeline.RenderLines(ctx, b.project.ID, ids)
	require.NoError(t, err)
	b.waitSettled(t, 2*time.Minute)
	require.EqualValues(t, 2, eng.prepared.Load())
}

func TestCancelStopsTheRender(t *testing.T) {
	t.Parallel()
	b := setup(t, 5)
	ctx := context.Background()
	_, err := b.pipeline.RenderPending(ctx, b.project.ID)
	require.NoError(t, err)
	n, err := b.pipeline.Cancel(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, 5, n)
	b.startWorker(t, workerOpts{})
	counts := b.waitSettled(t, time.Minute)
	require.Equal(t, 5, counts[studio.StateCancelled])
	var takes int
	require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT count(*) FROM takes`).Scan(&takes))
	require.Zero(t, takes)
}

func TestMain(m *testing.M) {
	if os.Getenv(victimEnv) != "" {
		runVictim()
		return
	}
	os.Exit(m.Run())
}

func TestGlossaryIsSpoken(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	ctx := context.Background()
	_, err := b.store.ImportLines(ctx, b.editor.ID, b.project.ID, []studio.NewLine{
		{SourceLine: 1, StartMs: 0, EndMs: 3000, CharacterName: "Ann", Text: "NASA called Ann."}})
	require.NoError(t, err)
	require.NoError(t, b.store.AddGlossaryEntry(ctx, b.project.ID, "NASA", "nasa"))
	b.startWorker(t, workerOpts{})
	_, err = b.pipeline.RenderPending(ctx, b.project.ID)
	require.NoError(t, err)
	b.waitSettled(t, time.Minute)
	l := b.lines(t)[0]
	takes, err := b.store.Takes(ctx, b.project.ID, l.ID)
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
	_, err = b.store.ImportLines(ctx, b.editor.ID, b.project.ID, lines)
	require.NoError(t, err)
	b.startWorker(t, workerOpts{})
	_, err = b.pipeline.RenderPending(ctx, b.project.ID)
	require.NoError(t, err)
	counts := b.waitSettled(t, 3*time.Minute)
	require.Equal(t, len(cues), counts[studio.StateDone]+counts[studio.StateNeedsReview], "%v", counts)

	blobs := studio.BlobStore{Dir: b.dataDir + "/blobs"}
	for _, l := range b.lines(t) {
		tk, err := b.store.Take(ctx, b.project.ID, *l.CurrentTakeID)
		require.NoError(t, err)
		path, _ := blobs.Path(tk.AudioSHA256)
		pcm, err := audio.ReadWAVFile(path)
		require.NoError(t, err)
		want := audio.SamplesFor(l.DurationMs()+tk.BorrowedMs, pcm.SampleRate)
		require.InDelta(t, want, pcm.Frames(), 1, "line %d: %q", l.Idx, l.Text)
		if tk.NeedsReview {
			require.Equal(t, studio.StateNeedsReview, l.State)
			require.Greater(t, tk.NeededRatio, b.project.StretchMax)
		} else {
			require.Equal(t, studio.StateDone, l.State)
			require.GreaterOrEqual(t, tk.StretchRatio, b.project.StretchMin-1e-9)
			require.LessOrEqual(t, tk.StretchRatio, b.project.StretchMax+1e-9)
		}
	}
}
