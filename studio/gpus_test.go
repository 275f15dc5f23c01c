package studio_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/internal/testdb"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

type gpuBundle struct {
	store *studio.Store
	admin *studio.User
}

func setupGPU(t *testing.T) *gpuBundle {
	t.Helper()
	s := studiotest.Store(t)
	return &gpuBundle{store: s, admin: studiotest.User(t, s, studio.RoleAdmin)}
}

func (b *gpuBundle) profile(t *testing.T, name string, concurrency int) *studio.GPUProfile {
	t.Helper()
	p := &studio.GPUProfile{GPUProfileSettings: studio.GPUProfileSettings{Name: name, Concurrency: concurrency, ReservePct: 15, LongTextThresholdSec: 15, LongLaneLimit: 1,
		MaxGenSeconds: 30, SegmentTokens: 120, FP16: true}}
	require.NoError(t, b.store.SaveGPUProfile(context.Background(), b.admin.ID, p))
	return p
}

func TestGPUProfilesAndAssignments(t *testing.T) {
	t.Parallel()
	b := setupGPU(t)
	ctx := context.Background()
	p := b.profile(t, "h200", 4)
	require.NotZero(t, p.ID)
	require.Equal(t, 4, p.Concurrency)
	require.False(t, p.UpdatedAt.IsZero())

	dup := &studio.GPUProfile{GPUProfileSettings: studio.GPUProfileSettings{Name: "h200", Concurrency: 1, ReservePct: 10, LongTextThresholdSec: 10, LongLaneLimit: 1,
		MaxGenSeconds: 20, SegmentTokens: 100}}
	require.ErrorIs(t, b.store.SaveGPUProfile(ctx, b.admin.ID, dup), studio.ErrConflict)

	p.Concurrency, p.ReservePct = 6, 20
	require.NoError(t, b.store.SaveGPUProfile(ctx, b.admin.ID, p))
	got, err := b.store.GPUProfileByID(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 6, got.Concurrency)
	require.InDelta(t, 20, got.ReservePct, 1e-9)

	// The database refuses what validation would (a backstop).
	bad := &studio.GPUProfile{GPUProfileSettings: studio.GPUProfileSettings{Name: "bad", Concurrency: 0, ReservePct: 95, LongTextThresholdSec: 1, LongLaneLimit: 1,
		MaxGenSeconds: 1, SegmentTokens: 1}}
	require.Error(t, b.store.SaveGPUProfile(ctx, b.admin.ID, bad))

	require.NoError(t, b.store.AssignGPUProfile(ctx, b.admin.ID, "GPU-a", p.ID))
	require.NoError(t, b.store.AssignGPUProfile(ctx, b.admin.ID, "GPU-b", p.ID))
	require.ErrorIs(t, b.store.AssignGPUProfile(ctx, b.admin.ID, "GPU-c", 999999), studio.ErrNotFound)
	as, err := b.store.GPUAssignments(ctx)
	require.NoError(t, err)
	require.Len(t, as, 2)
	require.Equal(t, "h200", as[0].ProfileName)

	settings, err := b.store.GPUSettings(ctx, []string{"GPU-a", "GPU-z"})
	require.NoError(t, err)
	require.Len(t, settings, 1, "an unassigned GPU runs the default")
	require.Equal(t, 6, settings["GPU-a"].Profile.Concurrency)
	require.Nil(t, settings["GPU-a"].Calibration)

	require.NoError(t, b.store.AssignGPUProfile(ctx, b.admin.ID, "GPU-b", 0))
	as, err = b.store.GPUAssignments(ctx)
	require.NoError(t, err)
	require.Len(t, as, 1)

	// Deleting a profile sends its GPUs back to the default.
	require.NoError(t, b.store.DeleteGPUProfile(ctx, p.ID))
	as, err = b.store.GPUAssignments(ctx)
	require.NoError(t, err)
	require.Empty(t, as)
	require.ErrorIs(t, b.store.DeleteGPUProfile(ctx, p.ID), studio.ErrNotFound)
}

func TestGPUCalibrationLifecycle(t *testing.T) {
	t.Parallel()
	b := setupGPU(t)
	ctx := context.Background()
	p := b.profile(t, "l40s", 2)
	require.NoError(t, b.store.RegisterWorker(ctx, studio.WorkerInfo{Name: "w1", Host: "gpu-host", PID: 1}))

	c, err := b.store.RequestGPUCalibration(ctx, b.admin.ID, "GPU-a", "NVIDIA L40S", *p)
	require.NoError(t, err)
	require.Equal(t, studio.CalibrationRequested, c.Status)
	require.True(t, c.Active())
	_, err = b.store.RequestGPUCalibration(ctx, b.admin.ID, "GPU-a", "NVIDIA L40S", *p)
	require.ErrorIs(t, err, studio.ErrConflict, "one calibration at a time per GPU")

	none, err := b.store.ClaimGPUCalibrations(ctx, "w1", []string{"GPU-other"})
	require.NoError(t, err)
	require.Empty(t, none)
	claimed, err := b.store.ClaimGPUCalibrations(ctx, "w1", []string{"GPU-a"})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, studio.CalibrationRunning, claimed[0].Status)
	require.Equal(t, "w1", claimed[0].Worker)
	again, err := b.store.ClaimGPUCalibrations(ctx, "w2", []string{"GPU-a"})
	require.NoError(t, err)
	require.Empty(t, again, "claimed once")
	require.ErrorIs(t, b.store.CancelGPUCalibration(ctx, c.ID), studio.ErrConflict)

	require.NoError(t, b.store.SetGPUCalibrationProgress(ctx, c.ID, "load test: concurrency 2"))
	got, err := b.store.GPUCalibrationByID(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, "load test: concurrency 2", got.Progress)
	prof, err := got.ProfileValue()
	require.NoError(t, err)
	require.Equal(t, "l40s", prof.Name)

	result := json.RawMessage(`{"recommended": 3, "resident_bytes": 5000000000}`)
	require.NoError(t, b.store.FinishGPUCalibration(ctx, c.ID, result, ""))
	got, err = b.store.GPUCalibrationByID(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, studio.CalibrationDone, got.Status)
	require.JSONEq(t, string(result), string(got.Result))
	require.NotNil(t, got.FinishedAt)

	// Applying: the profile gets the recommended concurrency, the GPU the curve.
	require.NoError(t, b.store.ApplyGPUCalibration(ctx, b.admin.ID, c.ID, 3, 5))
	pp, err := b.store.GPUProfileByID(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 3, pp.Concurrency)
	require.Equal(t, 3, pp.LongLaneLimit, "the lane limit never exceeds the concurrency")
	settings, err := b.store.GPUSettings(ctx, []string{"GPU-a"})
	require.NoError(t, err)
	require.Equal(t, c.ID, *settings["GPU-a"].CalibrationID)
	require.JSONEq(t, string(result), string(settings["GPU-a"].Calibration))
	got, err = b.store.GPUCalibrationByID(ctx, c.ID)
	require.NoError(t, err)
	require.NotNil(t, got.AppliedAt)

	// A new run may start once the last ended; a failed one cannot be applied.
	c2, err := b.store.RequestGPUCalibration(ctx, b.admin.ID, "GPU-a", "NVIDIA L40S", *p)
	require.NoError(t, err)
	_, err = b.store.ClaimGPUCalibrations(ctx, "w1", []string{"GPU-a"})
	require.NoError(t, err)
	require.NoError(t, b.store.FinishGPUCalibration(ctx, c2.ID, nil, "host did not start"))
	require.ErrorIs(t, b.store.ApplyGPUCalibration(ctx, b.admin.ID, c2.ID, 2, 1), studio.ErrConflict)

	// A run left behind by a worker that is gone fails when the next claim looks.
	c3, err := b.store.RequestGPUCalibration(ctx, b.admin.ID, "GPU-a", "", *p)
	require.NoError(t, err)
	_, err = b.store.ClaimGPUCalibrations(ctx, "w1", []string{"GPU-a"})
	require.NoError(t, err)
	require.NoError(t, b.store.UnregisterWorker(ctx, "w1"))
	_, err = b.store.ClaimGPUCalibrations(ctx, "w2", []string{"GPU-b"})
	require.NoError(t, err)
	got, err = b.store.GPUCalibrationByID(ctx, c3.ID)
	require.NoError(t, err)
	require.Equal(t, studio.CalibrationFailed, got.Status)

	list, err := b.store.GPUCalibrations(ctx, 10)
	require.NoError(t, err)
	require.Len(t, list, 3)
	require.Equal(t, c3.ID, list[0].ID, "newest first")
}

func TestApplyCalibrationOfDeletedProfile(t *testing.T) {
	t.Parallel()
	b := setupGPU(t)
	ctx := context.Background()
	p := b.profile(t, "gone", 2)
	c := &studio.GPUCalibration{GPUUUID: "GPU-x", GPUName: "Card", ProfileID: &p.ID, Result: json.RawMessage(`{}`)}
	pj, err := json.Marshal(p)
	require.NoError(t, err)
	c.Profile = pj
	require.NoError(t, b.store.SaveGPUCalibration(ctx, c))
	require.Equal(t, studio.CalibrationDone, c.Status)
	require.NoError(t, b.store.DeleteGPUProfile(ctx, p.ID))

	require.NoError(t, b.store.ApplyGPUCalibration(ctx, b.admin.ID, c.ID, 4, 2))
	as, err := b.store.GPUAssignments(ctx)
	require.NoError(t, err)
	require.Len(t, as, 1)
	require.Equal(t, "gone", as[0].ProfileName, "recreated under its old name")
	np, err := b.store.GPUProfileByID(ctx, as[0].ProfileID)
	require.NoError(t, err)
	require.Equal(t, 4, np.Concurrency)
	require.Equal(t, 2, np.LongLaneLimit)
}

func TestGPUHistoryAndLiveState(t *testing.T) {
	t.Parallel()
	b := setupGPU(t)
	ctx := context.Background()
	m := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	rows := []studio.GPUMinute{
		{Host: "h1", GPUUUID: "GPU-a", Minute: m, Samples: 60, AvgUsedBytes: 10, MaxUsedBytes: 20, TotalBytes: 100,
			AvgUtil: 50, MaxUtil: 90, AvgTempC: 60, MaxTempC: 65, AvgPowerW: 300, MaxPowerW: 410},
		{Host: "h1", GPUUUID: "GPU-a", Minute: m.Add(time.Minute), Samples: 60, MaxUsedBytes: 30},
	}
	require.NoError(t, b.store.SaveGPUHistory(ctx, rows))
	rows[1].MaxUsedBytes = 40 // stored again: replaced
	require.NoError(t, b.store.SaveGPUHistory(ctx, rows[1:]))
	got, err := b.store.GPUHistory(ctx, "GPU-a", m)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.EqualValues(t, 40, got[1].MaxUsedBytes)
	require.InDelta(t, 410, got[0].MaxPowerW, 1e-3)
	n, err := b.store.PruneGPUHistory(ctx, m.Add(time.Minute))
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	state := json.RawMessage(`{"gpus": [{"uuid": "GPU-a"}]}`)
	require.ErrorIs(t, b.store.PublishGPULive(ctx, "w1", "h1", state), studio.ErrNotFound, "unregistered")
	require.NoError(t, b.store.RegisterWorker(ctx, studio.WorkerInfo{Name: "w1", Host: "h1", PID: 1}))
	require.NoError(t, b.store.PublishGPULive(ctx, "w1", "h1", state))
	require.NoError(t, b.store.PublishGPULive(ctx, "w1", "h1", state))
	live, err := b.store.GPULiveStates(ctx)
	require.NoError(t, err)
	require.Len(t, live, 1)
	require.JSONEq(t, string(state), string(live[0].State))
	require.True(t, live[0].Alive())
	require.NoError(t, b.store.UnregisterWorker(ctx, "w1"))
	live, err = b.store.GPULiveStates(ctx)
	require.NoError(t, err)
	require.Empty(t, live, "the state goes with the worker")
}

// The web server's clock may be off from the database's by any amount; heartbeats
// are written with the database's now(), so how long ago they were is read by it too.
// Here both clocks are one: the test checks the database's reading (Silence, Age),
// not a skew, which it cannot make.
func TestSilenceIsReadByTheDatabaseClock(t *testing.T) {
	t.Parallel()
	b := setupGPU(t)
	ctx := context.Background()
	require.NoError(t, b.store.RegisterWorker(ctx, studio.WorkerInfo{Name: "quiet", Host: "h1", PID: 1}))
	require.NoError(t, b.store.PublishGPULive(ctx, "quiet", "h1", json.RawMessage(`{"gpus": []}`)))
	_, err := b.store.Pool().Exec(ctx, `UPDATE workers SET heartbeat_at = now() - interval '25 seconds' WHERE name = 'quiet'`)
	require.NoError(t, err)
	_, err = b.store.Pool().Exec(ctx, `UPDATE gpu_live SET updated_at = now() - interval '12 seconds' WHERE worker = 'quiet'`)
	require.NoError(t, err)

	ws, err := b.store.Workers(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.InDelta(t, 25, ws[0].Silence.Seconds(), 2)
	require.False(t, ws[0].Alive(), "20 s without a heartbeat")
	live, err := b.store.GPULiveStates(ctx)
	require.NoError(t, err)
	require.Len(t, live, 1)
	require.InDelta(t, 25, live[0].Silence.Seconds(), 2)
	require.InDelta(t, 12, live[0].Age.Seconds(), 2)
	require.False(t, live[0].Alive())

	require.NoError(t, b.store.WorkerHeartbeat(ctx, "quiet"))
	ws, err = b.store.Workers(ctx)
	require.NoError(t, err)
	require.Less(t, ws[0].Silence, 2*time.Second)
	require.True(t, ws[0].Alive())
}

func TestMetricsQueries(t *testing.T) {
	t.Parallel()
	s := studiotest.Store(t)
	ctx := context.Background()
	u := studiotest.User(t, s, studio.RoleEditor)
	p := studiotest.Project(t, s, u, 3)
	counts, err := s.LineStateCounts(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, counts[studio.StateDraft])

	lines, err := s.AllLines(ctx, p.ID)
	require.NoError(t, err)
	sha := strings.Repeat("c", 64)
	_, err = s.Pool().Exec(ctx, `INSERT INTO blobs (sha256, size_bytes, format, duration_ms, sample_rate, channels)
		VALUES ($1, 1, 'wav', 1000, 48000, 1)`, sha)
	require.NoError(t, err)
	for i, ms := range []int{400, 1500, 9000} {
		_, err = s.Pool().Exec(ctx, `INSERT INTO takes (line_id, project_id, revision, render_seq, engine, spoken_text,
			audio_sha256, synth_ms) VALUES ($1, $2, 1, $3, 'sim', 'x', $4, $5)`, lines[0].ID, p.ID, i+1, sha, ms)
		require.NoError(t, err)
	}
	n, sum, buckets, err := s.SynthesisHistogram(ctx, []float64{0.5, 2, 10})
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	require.InDelta(t, 10.9, sum, 1e-9)
	require.Equal(t, map[float64]uint64{0.5: 1, 2: 2, 10: 3}, buckets)

	qc, err := s.QueueCounts(ctx)
	require.NoError(t, err)
	require.Empty(t, qc)
}

func TestGPUProfileBatchingSettings(t *testing.T) {
	t.Parallel()
	b := setupGPU(t)
	ctx := context.Background()
	p := &studio.GPUProfile{GPUProfileSettings: studio.GPUProfileSettings{Name: "batch", Concurrency: 64, ReservePct: 10,
		LongTextThresholdSec: 15, LongLaneLimit: 8, MaxGenSeconds: 30, SegmentTokens: 120, FP16: true,
		Batching: true, Beams: 1, KVCacheGiB: 24.5}}
	require.NoError(t, b.store.SaveGPUProfile(ctx, b.admin.ID, p))
	got, err := b.store.GPUProfileByID(ctx, p.ID)
	require.NoError(t, err)
	require.True(t, got.Batching)
	require.Equal(t, 1, got.Beams)
	require.InDelta(t, 24.5, got.KVCacheGiB, 1e-12)

	got.Batching, got.Beams, got.KVCacheGiB = false, 3, 0
	require.NoError(t, b.store.SaveGPUProfile(ctx, b.admin.ID, got))
	again, err := b.store.GPUProfileByID(ctx, p.ID)
	require.NoError(t, err)
	require.False(t, again.Batching)
	require.Equal(t, 3, again.Beams)
	require.Zero(t, again.KVCacheGiB)

	// The database refuses what validation would (a backstop).
	again.Beams = 9
	require.Error(t, b.store.SaveGPUProfile(ctx, b.admin.ID, again))
}

func TestGPUProfileS2melPrecision(t *testing.T) {
	t.Parallel()
	b := setupGPU(t)
	ctx := context.Background()
	p := &studio.GPUProfile{GPUProfileSettings: studio.GPUProfileSettings{Name: "bf16", Concurrency: 32, ReservePct: 10,
		LongTextThresholdSec: 15, LongLaneLimit: 4, MaxGenSeconds: 30, SegmentTokens: 120, FP16: true,
		Batching: true, Beams: 3, S2melPrecision: "bf16"}}
	require.NoError(t, b.store.SaveGPUProfile(ctx, b.admin.ID, p))
	got, err := b.store.GPUProfileByID(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, "bf16", got.S2melPrecision)

	got.S2melPrecision = "fp32"
	require.NoError(t, b.store.SaveGPUProfile(ctx, b.admin.ID, got))
	again, err := b.store.GPUProfileByID(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, "fp32", again.S2melPrecision)

	// A profile written without the column (as before migration 0024) reads fp32.
	pool := testdb.Pool(t)
	s, err := studio.NewStore(pool)
	require.NoError(t, err)
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO gpu_profiles (name, concurrency, reserve_pct, long_text_threshold_sec,
		long_lane_limit, max_gen_seconds, segment_tokens) VALUES ('old', 2, 15, 15, 1, 30, 120) RETURNING id`).Scan(&id))
	old, err := s.GPUProfileByID(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "fp32", old.S2melPrecision)

	// The database refuses a precision validation would (a backstop), and keeps the old one.
	again.S2melPrecision = "fp16"
	require.Error(t, b.store.SaveGPUProfile(ctx, b.admin.ID, again))
	kept, err := b.store.GPUProfileByID(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, "fp32", kept.S2melPrecision)
}
