package workflow

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"dubstudio/audio"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
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
