package studio_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/blobhash"
	"dubstudio/i18n"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

func TestRenderInputGathersWhatASynthesisNeeds(t *testing.T) {
	t.Parallel()
	b, lines := setupLines(t, 5) // Alice, Bob, Alice, Bob, Alice; 1.5 s each, 0.5 s apart
	ctx := context.Background()
	require.NoError(t, b.store.AddGlossaryEntry(ctx, b.project.ID, "TV", "tee vee"))
	require.NoError(t, b.store.AddGlossaryEntry(ctx, b.project.ID, "Dubstudio", "dub studio"))

	in, err := b.store.RenderInput(ctx, lines[0].ID)
	require.NoError(t, err)
	require.Equal(t, lines[0].ID, in.Line.ID)
	require.Equal(t, lines[0].Text, in.Line.Text)
	project, err := b.store.Project(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, *project, in.Project)
	require.NotNil(t, in.Character)
	require.Equal(t, *lines[0].CharacterID, in.Character.ID)
	require.Equal(t, "Alice", in.Character.Name)
	require.Equal(t, studio.EmotionSpeaker, in.Character.Emotion.Mode)
	require.Len(t, in.Glossary, 2)
	require.Equal(t, []string{"Dubstudio", "TV"}, []string{in.Glossary[0].Term, in.Glossary[1].Term}, "longest first")
	require.Equal(t, "dub studio", in.Glossary[0].Spoken)

	// A line without a character.
	_, err = b.store.AssignCharacter(ctx, b.editor.ID, b.project.ID, []int64{lines[3].ID}, nil)
	require.NoError(t, err)
	in, err = b.store.RenderInput(ctx, lines[3].ID)
	require.NoError(t, err)
	require.Nil(t, in.Character)
	require.Len(t, in.Glossary, 2)

	_, err = b.store.RenderInput(ctx, -1)
	require.ErrorIs(t, err, studio.ErrNotFound)
}

func TestFitInputGathersWhatAFitNeeds(t *testing.T) {
	t.Parallel()
	b, lines := setupLines(t, 5) // Alice, Bob, Alice, Bob, Alice; 1.5 s each, 0.5 s apart
	ctx := context.Background()
	studiotest.Exec(t, b.store, `UPDATE projects SET stretch_min = 0.8, stretch_max = 1.25, loudness_lufs = -20,
		max_speed_step = 0.1, gap_borrow_ms = 250 WHERE id = $1`, b.project.ID)
	studiotest.Exec(t, b.store, `UPDATE lines SET duration_lock = false WHERE id = $1`, lines[1].ID)

	in, err := b.store.FitInput(ctx, lines[0].ID)
	require.NoError(t, err)
	require.Equal(t, studio.FitInput{RenderSeq: lines[0].RenderSeq, State: lines[0].State, DurationLock: true, SlotMs: 1500,
		StretchMin: 0.8, StretchMax: 1.25, LoudnessLUFS: -20, MaxSpeedStep: 0.1, GapBorrowMs: 250, GapAfterMs: 500}, *in,
		"no earlier line of Alice's: no ratio")
	in, err = b.store.FitInput(ctx, lines[1].ID)
	require.NoError(t, err)
	require.False(t, in.DurationLock)

	// The ratio is the nearest earlier take of the same character.
	bs := studio.BlobStore{Dir: t.TempDir()}
	tk := addTake(t, b, bs, lines[0], "alice one")
	studiotest.Exec(t, b.store, `UPDATE takes SET stretch_ratio = 1.2 WHERE id = $1`, tk.ID)
	addTake(t, b, bs, lines[1], "bob one") // ratio 1
	in, err = b.store.FitInput(ctx, lines[4].ID)
	require.NoError(t, err)
	require.InDelta(t, 1.2, in.PrevRatio, 1e-9, "line 3 has no take: line 1's")
	require.Zero(t, in.GapAfterMs, "the last line")
	in, err = b.store.FitInput(ctx, lines[3].ID)
	require.NoError(t, err)
	require.InDelta(t, 1, in.PrevRatio, 1e-9)
	require.Equal(t, 500, in.GapAfterMs)

	move := func(l studio.Line, startMs, endMs int) {
		t.Helper()
		_, err := b.store.UpdateLine(ctx, b.editor.ID, b.project.ID, l.ID, studio.LineEdit{BaseRevision: l.Revision,
			StartMs: &startMs, EndMs: &endMs})
		require.NoError(t, err)
	}
	// A later line that starts before this one ends closes the gap.
	move(lines[2], 1000, 1400)
	in, err = b.store.FitInput(ctx, lines[0].ID)
	require.NoError(t, err)
	require.Zero(t, in.GapAfterMs)

	// A line without a character has no ratio to follow.
	_, err = b.store.AssignCharacter(ctx, b.editor.ID, b.project.ID, []int64{lines[3].ID}, nil)
	require.NoError(t, err)
	in, err = b.store.FitInput(ctx, lines[3].ID)
	require.NoError(t, err)
	require.Zero(t, in.PrevRatio)
	require.Equal(t, 500, in.GapAfterMs)

	// The next line in time counts, wherever it is in the script: an earlier line
	// moved after the last one ends the last one's silence.
	move(lines[1], 9800, 10000)
	in, err = b.store.FitInput(ctx, lines[4].ID)
	require.NoError(t, err)
	require.Equal(t, 300, in.GapAfterMs)

	_, err = b.store.FitInput(ctx, -1)
	require.ErrorIs(t, err, studio.ErrNotFound)
}

// setupLine is setup with n lines, a blob store, and the first line.
func setupLine(t *testing.T, n int) (*testBundle, studio.BlobStore, studio.Line) {
	t.Helper()
	b, lines := setupLines(t, n)
	return b, studio.BlobStore{Dir: t.TempDir()}, lines[0]
}

// setupLines is setup with n lines, and the lines.
func setupLines(t *testing.T, n int) (*testBundle, []studio.Line) {
	t.Helper()
	b := setup(t, n)
	lines, err := b.store.AllLines(context.Background(), b.project.ID)
	require.NoError(t, err)
	return b, lines
}

// requeue queues new renders of lines, as the pipeline does, without jobs.
func requeue(t *testing.T, b *testBundle, lineIDs ...int64) {
	t.Helper()
	_, err := b.store.QueueRenders(context.Background(), b.project.ID, studio.RenderChosen, lineIDs,
		func(_ context.Context, _ *sql.Tx, ls []studio.QueuedLine) ([]int64, error) {
			return make([]int64, len(ls)), nil
		})
	require.NoError(t, err)
}

// blobFile writes content into a temporary file and moves it into bs as a render
// does, without recording it: the statement that uses it records it.
func blobFile(t *testing.T, bs studio.BlobStore, content string) studio.Blob {
	t.Helper()
	p := filepath.Join(t.TempDir(), "take.wav")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	sum, err := blobhash.File(p)
	require.NoError(t, err)
	require.NoError(t, bs.Put(p, sum))
	require.NoFileExists(t, p)
	return studio.Blob{SHA256: sum, SizeBytes: int64(len(content)), Format: "wav", DurationMs: 1000, SampleRate: 48000, Channels: 1}
}

func TestFinishRenderStoresOneTakePerRender(t *testing.T) {
	t.Parallel()
	b, bs, l := setupLine(t, 2)
	ctx := context.Background()
	raw, fitted := blobFile(t, bs, "raw"), blobFile(t, bs, "fitted")
	take := func() *studio.Take {
		return &studio.Take{LineID: l.ID, ProjectID: l.ProjectID, Revision: l.Revision, RenderSeq: l.RenderSeq,
			Engine: "test", SpokenText: l.Text, DurationMs: 1000, StretchRatio: 1.1, LoudnessLUFS: -23, NeedsReview: true,
			Hint: &studio.TakeHint{Key: "audio.fit.too_long", Args: []any{12.0}}, AudioSHA256: fitted.SHA256, RawSHA256: &raw.SHA256}
	}

	// The blobs are recorded in the same statement as the take that refers to them.
	tk := take()
	ok, err := b.store.FinishRender(ctx, tk, raw, fitted)
	require.NoError(t, err)
	require.True(t, ok)
	require.NotZero(t, tk.ID)
	got, err := b.store.Take(ctx, b.project.ID, tk.ID)
	require.NoError(t, err)
	require.Equal(t, fitted.SHA256, got.AudioSHA256)
	require.Equal(t, raw.SHA256, *got.RawSHA256)
	require.Equal(t, tk.Hint, got.Hint)
	require.True(t, got.NeedsReview)
	require.InDelta(t, 1.1, got.StretchRatio, 1e-9)
	stored, err := b.store.Blob(ctx, fitted.SHA256)
	require.NoError(t, err)
	require.Equal(t, int64(len("fitted")), stored.SizeBytes)
	line, err := b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, studio.StateNeedsReview, line.State)
	require.Equal(t, tk.ID, *line.CurrentTakeID)

	// A retried job of the same render: no second take, the line points at the first.
	again := take()
	again.NeedsReview, again.Hint = false, nil
	ok, err = b.store.FinishRender(ctx, again, raw, fitted)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, tk.ID, again.ID)
	takes, err := b.store.Takes(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Len(t, takes, 1)

	// A stale render (the line was queued again since) stores nothing.
	_, err = b.store.QueueRenders(ctx, b.project.ID, studio.RenderChosen, []int64{l.ID},
		func(_ context.Context, _ *sql.Tx, ls []studio.QueuedLine) ([]int64, error) {
			return make([]int64, len(ls)), nil
		})
	require.NoError(t, err)
	ok, err = b.store.FinishRender(ctx, take(), raw, fitted)
	require.NoError(t, err)
	require.False(t, ok)
	line, err = b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, studio.StateQueued, line.State)

	// And a cancelled one neither.
	_, err = b.store.CancelRenders(ctx, b.project.ID)
	require.NoError(t, err)
	line, err = b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	cancelled := take()
	cancelled.RenderSeq = line.RenderSeq
	ok, err = b.store.FinishRender(ctx, cancelled)
	require.NoError(t, err)
	require.False(t, ok)
	takes, err = b.store.Takes(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Len(t, takes, 1)
}

func TestStartFit(t *testing.T) {
	t.Parallel()
	b, bs, l := setupLine(t, 1)
	ctx := context.Background()
	requeue(t, b, l.ID)
	raw := blobFile(t, bs, "raw output")
	commit := func(tx *sql.Tx) string {
		var setting string
		require.NoError(t, tx.QueryRowContext(ctx, `SHOW synchronous_commit`).Scan(&setting))
		return setting
	}
	// The synthesis fits the take itself: the same job writes again before it ends,
	// so no wait for the log flush. (StartFit's statement is then its own
	// transaction; the tests' hook watches it in an explicit one.)
	var setting string
	in, err := studio.StartFitWatched(ctx, b.store, l.ID, l.RenderSeq+1, func(_ context.Context, tx *sql.Tx) error {
		setting = commit(tx)
		return nil
	}, raw)
	require.NoError(t, err)
	require.Equal(t, "off", setting)
	_, err = b.store.Blob(ctx, raw.SHA256)
	require.NoError(t, err)
	// It returns what FitInput reads once the line is fitting.
	want, err := b.store.FitInput(ctx, l.ID)
	require.NoError(t, err)
	require.Equal(t, want, in)
	require.Equal(t, studio.StateFitting, in.State)
	require.Equal(t, l.RenderSeq+1, in.RenderSeq)
	// And so does StartFit itself, without a hand-off.
	studiotest.Exec(t, b.store, `UPDATE lines SET state = 'synthesizing' WHERE id = $1`, l.ID)
	in, err = b.store.StartFit(ctx, l.ID, l.RenderSeq+1, nil)
	require.NoError(t, err)
	require.Equal(t, want, in)

	// Handing the render on to a fit job, the job's last write: synchronous, and in
	// the hand-off's transaction. (The line's render moved back to synthesizing, as a
	// rescued job does.)
	studiotest.Exec(t, b.store, `UPDATE lines SET state = 'synthesizing' WHERE id = $1`, l.ID)
	setting = ""
	in, err = b.store.StartFit(ctx, l.ID, l.RenderSeq+1, func(_ context.Context, tx *sql.Tx) error {
		setting = commit(tx)
		var state string
		require.NoError(t, tx.QueryRowContext(ctx, `SELECT state FROM lines WHERE id = $1`, l.ID).Scan(&state))
		require.Equal(t, "fitting", state, "the hand-off sees the line fitting")
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, "on", setting)
	require.Equal(t, studio.StateFitting, in.State)

	// A failing hand-off rolls the move back.
	studiotest.Exec(t, b.store, `UPDATE lines SET state = 'synthesizing' WHERE id = $1`, l.ID)
	handOffErr := errors.New("no fit job")
	_, err = b.store.StartFit(ctx, l.ID, l.RenderSeq+1, func(context.Context, *sql.Tx) error { return handOffErr })
	require.ErrorIs(t, err, handOffErr)
	line, err := b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, studio.StateSynthesizing, line.State)
	studiotest.Exec(t, b.store, `UPDATE lines SET state = 'fitting' WHERE id = $1`, l.ID)

	// Stale: the state stays, the blob is recorded all the same (it is on disk), and
	// nothing is handed off.
	other, another := blobFile(t, bs, "stale output"), blobFile(t, bs, "another")
	in, err = b.store.StartFit(ctx, l.ID, l.RenderSeq, nil, other)
	require.ErrorIs(t, err, studio.ErrNotFound)
	require.Nil(t, in)
	in, err = b.store.StartFit(ctx, l.ID, l.RenderSeq, func(context.Context, *sql.Tx) error {
		t.Error("a stale render was handed off")
		return nil
	}, another)
	require.ErrorIs(t, err, studio.ErrNotFound)
	require.Nil(t, in)
	for _, blob := range []studio.Blob{other, another} {
		_, err = b.store.Blob(ctx, blob.SHA256)
		require.NoError(t, err)
	}
	line, err = b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, studio.StateFitting, line.State)
}

// Two runs of one render finishing at once (a rescued job and its original): the
// second waits for the first's commit and points the line at the first's take.
func TestFinishRenderRacingItsTwin(t *testing.T) {
	t.Parallel()
	b, bs, l := setupLine(t, 1)
	ctx := context.Background()
	fitted := blobFile(t, bs, "fitted")
	take := func() *studio.Take {
		return &studio.Take{LineID: l.ID, ProjectID: l.ProjectID, Revision: l.Revision, RenderSeq: l.RenderSeq,
			Engine: "test", SpokenText: l.Text, DurationMs: 1000, StretchRatio: 1, AudioSHA256: fitted.SHA256}
	}

	studiotest.Exec(t, b.store, `INSERT INTO blobs (sha256, size_bytes, format, duration_ms, sample_rate, channels) VALUES ($1, 6, 'wav', 1000, 48000, 1)`,
		fitted.SHA256)
	// The first run, inside a transaction that holds the line's lock until it commits.
	tx, err := b.store.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	var firstID int64
	_, err = tx.Exec(ctx, `SELECT id FROM lines WHERE id = $1 FOR UPDATE`, l.ID)
	require.NoError(t, err)
	require.NoError(t, tx.QueryRow(ctx, `INSERT INTO takes (line_id, project_id, revision, render_seq, engine, spoken_text, audio_sha256)
		VALUES ($1, $2, $3, $4, 'test', '', $5) RETURNING id`, l.ID, l.ProjectID, l.Revision, l.RenderSeq, fitted.SHA256).Scan(&firstID))
	_, err = tx.Exec(ctx, `UPDATE lines SET current_take_id = $1, state = 'done' WHERE id = $2`, firstID, l.ID)
	require.NoError(t, err)

	second := take()
	done := make(chan error, 1)
	go func() {
		ok, err := b.store.FinishRender(ctx, second, fitted)
		if err == nil && !ok {
			err = errors.New("the second run found its render stale")
		}
		done <- err
	}()
	// Let the second run start and wait for the lock (its snapshot then predates the
	// first's commit); if it has not reached the lock yet, the test passes all the same.
	var waiting bool
	for range 200 {
		require.NoError(t, b.store.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting))
		if waiting {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("second run waiting for the lock: %v", waiting)
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-done)
	require.Equal(t, firstID, second.ID)
	line, err := b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, firstID, *line.CurrentTakeID)
	takes, err := b.store.Takes(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Len(t, takes, 1)
}

// A take keeps its resource usage as recorded, every figure in its own column; a
// take without one (a CPU engine's) reads back zeros and no GPU index.
func TestFinishRenderKeepsTheTakesUsage(t *testing.T) {
	t.Parallel()
	b, lines := setupLines(t, 2)
	bs, l := studio.BlobStore{Dir: t.TempDir()}, lines[0]
	ctx := context.Background()
	raw, fitted := blobFile(t, bs, "raw"), blobFile(t, bs, "fitted")
	idx := 3
	usage := studio.TakeUsage{PredictedVRAMBytes: 72_000_001, MeasuredVRAMBytes: 71_000_002, KVBytes: 5_000_003,
		ActivationBytes: 71_000_002, PermitWaitMs: 1234, HostQueueMs: 56, S2MelWaitMs: 99, GPTMs: 789, S2MelMs: 321,
		VocoderMs: 45, BatchRowsMean: 17.5, S2MelGroup: 4, GPUIndex: &idx}
	tk := &studio.Take{LineID: l.ID, ProjectID: l.ProjectID, Revision: l.Revision, RenderSeq: l.RenderSeq,
		Engine: "test", GPU: "GPU-x", SpokenText: l.Text, DurationMs: 1000, StretchRatio: 1, AudioSHA256: fitted.SHA256,
		RawSHA256: &raw.SHA256, Usage: usage}
	ok, err := b.store.FinishRender(ctx, tk, raw, fitted)
	require.NoError(t, err)
	require.True(t, ok)
	got, err := b.store.Take(ctx, b.project.ID, tk.ID)
	require.NoError(t, err)
	require.Equal(t, usage, got.Usage)
	require.Equal(t, 1389, got.Usage.QueueMs(), "the permit, the host's queue and the wait for s2mel")
	takes, err := b.store.Takes(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, usage, takes[0].Usage)

	cpu := &studio.Take{LineID: lines[1].ID, ProjectID: l.ProjectID, Revision: lines[1].Revision,
		RenderSeq: lines[1].RenderSeq, Engine: "espeak", SpokenText: lines[1].Text, DurationMs: 1000, StretchRatio: 1,
		AudioSHA256: fitted.SHA256}
	ok, err = b.store.FinishRender(ctx, cpu)
	require.NoError(t, err)
	require.True(t, ok)
	got, err = b.store.Take(ctx, b.project.ID, cpu.ID)
	require.NoError(t, err)
	require.Equal(t, studio.TakeUsage{}, got.Usage)
}

// A line imported under a higher MAX_LINE_SECONDS is refused when it is queued under
// the lower one, each such line named with its length; the other lines of the
// selection are queued, the refused ones left as they were.
func TestQueueRendersRefusesLinesOverTheLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	ctx := context.Background()
	b.store.Limits.MaxLineMs = 120_000 // the setting the script was imported under
	_, err := b.store.ImportLines(ctx, b.editor.ID, b.project.ID, []studio.NewLine{
		{SourceLine: 1, StartMs: 0, EndMs: 1500, CharacterName: "Alice", Text: "Short."},
		{SourceLine: 2, StartMs: 2000, EndMs: 92_000, CharacterName: "Bob", Text: "A monologue of ninety seconds."},
		{SourceLine: 3, StartMs: 93_000, EndMs: 153_000, CharacterName: "Alice", Text: "Sixty seconds: the limit itself."},
		{SourceLine: 4, StartMs: 154_000, EndMs: 214_500, CharacterName: "Bob", Text: "Sixty and a half."},
	})
	require.NoError(t, err)
	b.store.Limits.MaxLineMs = 0 // lowered to the default, 60 s
	before, err := b.store.AllLines(ctx, b.project.ID)
	require.NoError(t, err)

	var inserted []int
	insert := func(_ context.Context, _ *sql.Tx, ls []studio.QueuedLine) ([]int64, error) {
		for _, l := range ls {
			inserted = append(inserted, l.Idx)
		}
		return make([]int64, len(ls)), nil
	}
	n, err := b.store.QueueRenders(ctx, b.project.ID, studio.RenderPending, nil, insert)
	require.Equal(t, 2, n)
	require.Equal(t, []int{1, 3}, inserted, "only the lines within the limit get a job")
	var re *studio.RenderRefusedError
	require.ErrorAs(t, err, &re)
	require.ErrorIs(t, err, studio.ErrInvalid)
	require.Equal(t, []int{2, 4}, []int{re.Lines[0].Idx, re.Lines[1].Idx})
	require.Equal(t, before[1].ID, re.Lines[0].LineID)
	require.Equal(t, "Line 2 was not queued: it lasts 90 s, and a line may last at most 60 s (setting MAX_LINE_SECONDS). "+
		"Split it into shorter lines. Line 4 was not queued: it lasts 60.5 s, and a line may last at most 60 s "+
		"(setting MAX_LINE_SECONDS). Split it into shorter lines.", re.In(i18n.EN))
	require.Equal(t, "第 2 句未加入队列：它长 90 秒，一句台词最长 60 秒（设置 MAX_LINE_SECONDS）。请拆分为较短的几句。"+
		" 第 4 句未加入队列：它长 60.5 秒，一句台词最长 60 秒（设置 MAX_LINE_SECONDS）。请拆分为较短的几句。", re.In(i18n.ZH))

	after, err := b.store.AllLines(ctx, b.project.ID)
	require.NoError(t, err)
	require.Equal(t, studio.StateQueued, after[0].State)
	require.Equal(t, studio.StateQueued, after[2].State)
	for _, i := range []int{1, 3} {
		require.Equal(t, before[i], after[i], "line %d is left as it was", i+1)
	}

	// Chosen lines and failed ones alike; a selection of only refused lines queues none.
	inserted = nil
	n, err = b.store.QueueRenders(ctx, b.project.ID, studio.RenderChosen, []int64{before[3].ID}, insert)
	require.Zero(t, n)
	require.Empty(t, inserted)
	require.ErrorAs(t, err, &re)
	require.Len(t, re.Lines, 1)
	require.Equal(t, 4, re.Lines[0].Idx)
	studiotest.Exec(t, b.store, `UPDATE lines SET state = 'failed' WHERE project_id = $1`, b.project.ID)
	n, err = b.store.QueueRenders(ctx, b.project.ID, studio.RenderFailed, nil, insert)
	require.Equal(t, 2, n)
	require.ErrorAs(t, err, &re)
	require.Len(t, re.Lines, 2)

	// Under a limit that allows them, they queue.
	b.store.Limits.MaxLineMs = 120_000
	n, err = b.store.QueueRenders(ctx, b.project.ID, studio.RenderChosen, []int64{before[1].ID, before[3].ID}, insert)
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

// TestFinishRenderOfAFinishedRenderChangesNothing: a second run of a render that
// has recorded its take (a rescued synthesis and the fit job it handed the take to,
// whichever finishes second) finds the take and leaves the line as it is by then.
// Before the fix it set the line back to done on its take: an edit made since was
// shown done with the old text's take (and left out of "render pending"), and a
// take the editor went back to was replaced by the render's.
func TestFinishRenderOfAFinishedRenderChangesNothing(t *testing.T) {
	t.Parallel()
	b, bs, l := setupLine(t, 1)
	ctx := context.Background()
	requeue(t, b, l.ID)
	queued, err := b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	fitted := blobFile(t, bs, "fitted")
	take := func(line *studio.Line) *studio.Take {
		return &studio.Take{LineID: line.ID, ProjectID: line.ProjectID, Revision: line.Revision, RenderSeq: line.RenderSeq,
			Engine: "test", SpokenText: line.Text, DurationMs: 1000, StretchRatio: 1, AudioSHA256: fitted.SHA256}
	}
	first := take(queued)
	ok, err := b.store.FinishRender(ctx, first, fitted)
	require.NoError(t, err)
	require.True(t, ok)

	// The editor changes the text: the line goes back to draft, its render_seq kept.
	text := "Something else entirely."
	edited, err := b.store.UpdateLine(ctx, b.editor.ID, b.project.ID, l.ID, studio.LineEdit{BaseRevision: queued.Revision, Text: &text})
	require.NoError(t, err)
	require.Equal(t, studio.StateDraft, edited.State)
	require.Equal(t, queued.RenderSeq, edited.RenderSeq)

	// The render's twin finishes now.
	twin := take(queued)
	ok, err = b.store.FinishRender(ctx, twin, fitted)
	require.NoError(t, err)
	require.True(t, ok, "its take is there")
	require.Equal(t, first.ID, twin.ID)
	got, err := b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, studio.StateDraft, got.State, "the edit stands: the take is of the old text")

	// A second render done, the editor goes back to the first take; a retry of the
	// second render's job keeps the editor's choice.
	requeue(t, b, l.ID)
	again, err := b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	second := take(again)
	second.AudioSHA256 = blobFile(t, bs, "second").SHA256
	ok, err = b.store.FinishRender(ctx, second, studio.Blob{SHA256: second.AudioSHA256, SizeBytes: 6, Format: "wav",
		DurationMs: 1000, SampleRate: 48000, Channels: 1})
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, b.store.UseTake(ctx, b.project.ID, first.ID))
	retry := take(again)
	retry.AudioSHA256 = second.AudioSHA256
	ok, err = b.store.FinishRender(ctx, retry)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, second.ID, retry.ID)
	got, err = b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, first.ID, *got.CurrentTakeID, "the take the editor went back to")
	takes, err := b.store.Takes(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Len(t, takes, 2)
}

// TestFinishRenderAfterTheLastFailure: a render's twin (a rescued job and its
// original) finishing after the other recorded the render's last failure. Its take
// is kept, and the line done, while the line sounds as the render read it; once an
// editor has changed what it says (the failed line edited back to draft) it stores
// nothing, as when the editor went back to an earlier take. Before the fix it stored
// the old text's take and marked the edited line done.
func TestFinishRenderAfterTheLastFailure(t *testing.T) {
	t.Parallel()
	b, lines := setupLines(t, 3)
	bs := studio.BlobStore{Dir: t.TempDir()}
	ctx := context.Background()
	fitted := blobFile(t, bs, "fitted")
	failed := func(l studio.Line) *studio.Line {
		requeue(t, b, l.ID)
		queued, err := b.store.Line(ctx, b.project.ID, l.ID)
		require.NoError(t, err)
		ok, err := b.store.RenderFailure(ctx, l.ID, queued.RenderSeq, 3, "host lost", "", true)
		require.NoError(t, err)
		require.True(t, ok)
		return queued
	}
	take := func(line *studio.Line) *studio.Take {
		return &studio.Take{LineID: line.ID, ProjectID: line.ProjectID, Revision: line.Revision, RenderSeq: line.RenderSeq,
			Engine: "test", SpokenText: line.Text, DurationMs: 1000, StretchRatio: 1, AudioSHA256: fitted.SHA256}
	}

	// Only its notes changed: the take is of the line as it is.
	kept := failed(lines[0])
	notes := "breathier"
	_, err := b.store.UpdateLine(ctx, b.editor.ID, b.project.ID, kept.ID, studio.LineEdit{BaseRevision: kept.Revision, Notes: &notes})
	require.NoError(t, err)
	tk := take(kept)
	ok, err := b.store.FinishRender(ctx, tk, fitted)
	require.NoError(t, err)
	require.True(t, ok)
	got, err := b.store.Line(ctx, b.project.ID, kept.ID)
	require.NoError(t, err)
	require.Equal(t, studio.StateDone, got.State)
	require.Equal(t, tk.ID, *got.CurrentTakeID)
	require.Empty(t, got.LastError)

	// Its text changed: nothing is stored, the edit stands.
	edited := failed(lines[1])
	text := "Something else entirely."
	_, err = b.store.UpdateLine(ctx, b.editor.ID, b.project.ID, edited.ID, studio.LineEdit{BaseRevision: edited.Revision, Text: &text})
	require.NoError(t, err)
	ok, err = b.store.FinishRender(ctx, take(edited))
	require.NoError(t, err)
	require.False(t, ok)
	got, err = b.store.Line(ctx, b.project.ID, edited.ID)
	require.NoError(t, err)
	require.Equal(t, studio.StateDraft, got.State)
	require.Nil(t, got.CurrentTakeID)
	takes, err := b.store.Takes(ctx, b.project.ID, edited.ID)
	require.NoError(t, err)
	require.Empty(t, takes)

	// The editor went back to an earlier take: it stays, and the twin stores nothing.
	earlier := studiotest.Take(t, b.store, bs, t.TempDir(), lines[2], 48000, 0, 440)
	chosen := failed(lines[2])
	require.NoError(t, b.store.UseTake(ctx, b.project.ID, earlier.ID))
	ok, err = b.store.FinishRender(ctx, take(chosen))
	require.NoError(t, err)
	require.False(t, ok)
	got, err = b.store.Line(ctx, b.project.ID, chosen.ID)
	require.NoError(t, err)
	require.Equal(t, studio.StateDone, got.State)
	require.Equal(t, earlier.ID, *got.CurrentTakeID)
}
