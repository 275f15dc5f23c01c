package workflow

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"dubstudio/audio"
	"dubstudio/internal/simdev"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
	"dubstudio/tts"
)

// TestATakeRecordedAfterTheGapShrankIsFittedAgain: a render's fit reads the gap
// after its slot, and a change of the slots that commits before the take is recorded
// skips the line (it is being rendered). Once recorded, a take that runs further into
// the gap than is left is fitted again at once (Store.CheckOverrun).
func TestATakeRecordedAfterTheGapShrankIsFittedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, project, w, lines := renderQueued(t, 2, 1) // 0–1500, 2000–3500 ms, queued
	l := lines[0]
	in, err := store.FitInput(ctx, l.ID)
	require.NoError(t, err)
	require.Equal(t, 500, in.GapAfterMs, "the fit reads 500 ms free after the slot")

	// Meanwhile the next line moves up to 100 ms after it.
	studiotest.Exec(t, store, `UPDATE lines SET start_ms = 1600, end_ms = 3100 WHERE id = $1`, lines[1].ID)

	// The engine spoke 1.8 s: the fit borrows 300 ms of the 500 it read.
	pcm := audio.PCM{SampleRate: 48000, Channels: 1, Samples: make([]int16, 48000*18/10)}
	for k := range pcm.Samples {
		pcm.Samples[k] = int16(8000 * math.Sin(2*math.Pi*220*float64(k)/48000))
	}
	path := filepath.Join(t.TempDir(), "raw.wav")
	require.NoError(t, audio.WriteWAVFile(path, pcm))
	raw, err := store.PutBlob(ctx, w.blobs, path, studio.Blob{Format: audio.FormatWAV, DurationMs: 1800, SampleRate: 48000, Channels: 1})
	require.NoError(t, err)
	a := FitArgs{LineID: l.ID, RenderSeq: l.RenderSeq, ProjectID: project.ID, Revision: l.Revision, RawSHA256: raw.SHA256,
		SpokenText: l.Text, Engine: "espeak", Worker: w.cfg.Name, AudioSeconds: 1.8}
	require.NoError(t, w.fitTake(ctx, &rivertype.JobRow{ID: 1, Attempt: 1}, a, in, nil))

	takes, err := store.Takes(ctx, project.ID, l.ID)
	require.NoError(t, err)
	require.Len(t, takes, 1)
	require.Equal(t, 300, takes[0].BorrowedMs, "fitted to the gap it read")
	got, err := store.Line(ctx, project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, studio.StateFitting, got.State, "and at once fitted again")
	require.Equal(t, l.RenderSeq+1, got.RenderSeq)
	var refitOf int64
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT (args->>'refit_of')::bigint FROM river_job
		WHERE kind = 'fit_line' AND (args->>'line_id')::bigint = $1 AND (args->>'render_seq')::int = $2`, l.ID, got.RenderSeq).Scan(&refitOf))
	require.Equal(t, takes[0].ID, refitOf)
}

// longerEngine speaks every line 300 ms longer than its slot, so that its take
// borrows of the gap after it.
type longerEngine struct{ tts.Engine }

func (e longerEngine) Synthesize(ctx context.Context, req tts.Request) (tts.Result, error) {
	req.TargetSeconds += 0.3
	req.DurationFactor = 0
	return e.Engine.Synthesize(ctx, req)
}

// TestARetryChecksTheOverrunOfAFinishedRender: the synthesis recorded its take, and
// the overrun check that follows failed (the database went away). The job is
// retried, and the retry finds the render finished: it used to stop there, at its
// first state change, so a change of the slots that committed meanwhile and skipped
// the line was never caught, and the take ran into the next line for good. The
// retry runs the check, which fits the take again.
func TestARetryChecksTheOverrunOfAFinishedRender(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRivertest(t, 2, 1) // 0–1500, 2000–3500 ms, queued
	sim, err := tts.NewSimulator(tts.SimulatorConfig{Device: simdev.New(24 << 30), FollowTarget: true, Tone: true})
	require.NoError(t, err)
	b.w.permits = NewLocalPermits(longerEngine{sim}, 1)
	l := b.lines[0]
	checks := b.store.GapsChanged
	var failed atomic.Bool
	b.store.GapsChanged = func(ctx context.Context, tx *sql.Tx, projectID int64, lineIDs []int64) error {
		if failed.CompareAndSwap(false, true) {
			// Meanwhile the next line moved up to the end of this one's slot.
			studiotest.Exec(t, b.store, `UPDATE lines SET start_ms = 1500, end_ms = 3000 WHERE id = $1`, b.lines[1].ID)
			return errors.New("the server is going away")
		}
		return checks(ctx, tx, projectID, lineIDs)
	}
	work := func() river.EventKind {
		res, _ := b.synth.Work(ctx, t, b.tx, SynthesizeArgs{LineID: l.ID, RenderSeq: l.RenderSeq, ProjectID: b.project.ID},
			&river.InsertOpts{UniqueOpts: river.UniqueOpts{}})
		return res.EventKind
	}
	require.Equal(t, river.EventKindJobFailed, work(), "the check failed: River retries the job")
	require.True(t, failed.Load())
	takes, err := b.store.Takes(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Len(t, takes, 1)
	require.Positive(t, takes[0].BorrowedMs, "the take runs into the gap it read")
	got, err := b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Contains(t, []studio.LineState{studio.StateDone, studio.StateNeedsReview}, got.State)
	require.Empty(t, got.LastError, "the render succeeded: no failure on the line")

	require.Equal(t, river.EventKindJobCompleted, work())
	got, err = b.store.Line(ctx, b.project.ID, l.ID)
	require.NoError(t, err)
	require.Equal(t, studio.StateFitting, got.State, "the retry found the overrun: fitted again")
	require.Equal(t, l.RenderSeq+1, got.RenderSeq)
}
