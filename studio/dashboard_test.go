package studio_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// dashboardFixture is a project in every interesting state, with takes made by hand at
// known times before now.
type dashboardFixture struct {
	store *studio.Store
	now   time.Time
	p     *studio.Project // 4 lines by Alice and Bob (1.5 s each) and one without character (2.5 s)
	other *studio.Project // 2 lines, one take in the window: must not leak into p's numbers
	empty *studio.Project
	lines []studio.Line
}

func setupDashboard(t *testing.T) *dashboardFixture {
	t.Helper()
	ctx := context.Background()
	s := studiotest.Store(t)
	u := studiotest.User(t, s, studio.RoleEditor)
	f := &dashboardFixture{store: s, now: time.Date(2026, 5, 1, 12, 0, 30, 0, time.UTC),
		p: studiotest.Project(t, s, u, 4), other: studiotest.Project(t, s, u, 2), empty: studiotest.Project(t, s, u, 0)}
	_, err := s.ImportLines(ctx, u.ID, f.p.ID, []studio.NewLine{{SourceLine: 1, StartMs: 9000, EndMs: 11500, Text: "Nobody says this yet."}})
	require.NoError(t, err)
	f.lines, err = s.AllLines(ctx, f.p.ID)
	require.NoError(t, err)
	require.Len(t, f.lines, 5)

	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := s.Pool().Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	// Alice: done, failed long ago. Bob: needs review, failed a minute ago. Nobody: queued.
	setState := func(l studio.Line, state, lastError string, attempts int, changed time.Time) {
		exec(`UPDATE lines SET state = $2, last_error = $3, attempts = $4, state_changed_at = $5 WHERE id = $1`,
			l.ID, state, lastError, attempts, changed)
	}
	setState(f.lines[0], "done", "", 1, f.now.Add(-time.Minute))
	setState(f.lines[1], "needs_review", "", 1, f.now.Add(-5*time.Minute))
	setState(f.lines[2], "failed", "model host crashed", 3, f.now.Add(-10*time.Minute))
	setState(f.lines[3], "failed", `{"key":"error.internal"}`, 2, f.now.Add(-time.Minute))
	setState(f.lines[4], "queued", "", 0, f.now.Add(-time.Minute))

	sha := strings.Repeat("a", 64)
	exec(`INSERT INTO blobs (sha256, size_bytes, format, duration_ms, sample_rate, channels) VALUES ($1, 1, 'wav', 1500, 48000, 1)`, sha)
	take := func(projectID, lineID int64, seq int, durationMs int, at time.Time) {
		exec(`INSERT INTO takes (line_id, project_id, revision, render_seq, engine, spoken_text, audio_sha256, duration_ms, created_at)
			VALUES ($1, $2, 1, $3, 'sim', 'x', $4, $5, $6)`, lineID, projectID, seq, sha, durationMs, at)
	}
	take(f.p.ID, f.lines[0].ID, 1, 1500, f.now.Add(-time.Minute))
	take(f.p.ID, f.lines[1].ID, 1, 1500, f.now.Add(-5*time.Minute))
	take(f.p.ID, f.lines[0].ID, 2, 1400, f.now.Add(-20*time.Minute)) // before the 15-minute window
	take(f.p.ID, f.lines[1].ID, 2, 1400, f.now.Add(time.Minute))     // after now
	otherLines, err := s.AllLines(ctx, f.other.ID)
	require.NoError(t, err)
	take(f.other.ID, otherLines[0].ID, 1, 1500, f.now.Add(-2*time.Minute))
	return f
}

func TestProjectStats(t *testing.T) {
	t.Parallel()
	f := setupDashboard(t)
	ctx := context.Background()
	stats, err := f.store.ProjectStats(ctx, []int64{f.p.ID, f.other.ID, f.empty.ID}, studio.DashboardParams{Now: f.now})
	require.NoError(t, err)
	require.Len(t, stats, 3)

	st := stats[f.p.ID]
	require.Equal(t, studio.StateCounts{"done": 1, "needs_review": 1, "failed": 2, "queued": 1}, st.Counts)
	require.Equal(t, 2, st.Failed())
	require.EqualValues(t, 4*1500+2500, st.TotalAudioMs)
	require.EqualValues(t, 3000, st.DoneAudioMs, "done and needs review count as rendered")
	require.EqualValues(t, 5500, st.RemainingAudioMs())
	require.EqualValues(t, 2500, st.ActiveAudioMs, "the queued line alone")
	require.InDelta(t, 3000.0/8500, st.DoneFraction(), 1e-9)

	// Two takes (3 s of audio) in the last 15 minutes.
	require.Equal(t, studio.Throughput{Window: 15 * time.Minute, Takes: 2, AudioMs: 3000}, st.Recent)
	require.InDelta(t, 2.0/15, st.Recent.LinesPerMinute(), 1e-9)
	require.InDelta(t, 0.2, st.Recent.AudioMinutesPerHour(), 1e-9) // 0.05 min per quarter hour
	eta, ok := st.ETA()
	require.True(t, ok)
	// The queued line's 2.5 s at 3 s per 15 min; the failed lines' 3 s are not
	// counted, since nothing renders them until someone queues them again.
	require.Equal(t, 12*time.Minute+30*time.Second, eta)

	// The other project: one take in the window but nothing rendered in its lines'
	// states, so its own numbers only.
	require.Equal(t, studio.Throughput{Window: 15 * time.Minute, Takes: 1, AudioMs: 1500}, stats[f.other.ID].Recent)
	require.EqualValues(t, 3000, stats[f.other.ID].TotalAudioMs)

	// No lines: nothing to do, so nothing remains.
	empty := stats[f.empty.ID]
	require.Zero(t, empty.TotalAudioMs)
	require.Zero(t, empty.Counts.Total())
	eta, ok = empty.ETA()
	require.True(t, ok)
	require.Zero(t, eta)

	// A quiet hour later: work remains but nothing is being rendered, so no ETA.
	later, err := f.store.ProjectStats(ctx, []int64{f.p.ID}, studio.DashboardParams{Now: f.now.Add(time.Hour)})
	require.NoError(t, err)
	require.Zero(t, later[f.p.ID].Recent.Takes)
	_, ok = later[f.p.ID].ETA()
	require.False(t, ok)

	none, err := f.store.ProjectStats(ctx, nil, studio.DashboardParams{})
	require.NoError(t, err)
	require.Empty(t, none)
}

func TestCharacterStats(t *testing.T) {
	t.Parallel()
	f := setupDashboard(t)
	cs, err := f.store.CharacterStats(context.Background(), f.p.ID)
	require.NoError(t, err)
	require.Len(t, cs, 3)

	require.Equal(t, "Alice", cs[0].Name)
	require.NotNil(t, cs[0].CharacterID)
	require.NotEmpty(t, cs[0].Color)
	require.Equal(t, studio.StateCounts{"done": 1, "failed": 1}, cs[0].Counts)
	require.EqualValues(t, 3000, cs[0].TotalAudioMs)
	require.EqualValues(t, 1500, cs[0].DoneAudioMs)

	require.Equal(t, "Bob", cs[1].Name)
	require.Equal(t, studio.StateCounts{"needs_review": 1, "failed": 1}, cs[1].Counts)
	require.EqualValues(t, 1500, cs[1].DoneAudioMs)

	require.Nil(t, cs[2].CharacterID, "lines without a character come last")
	require.Equal(t, studio.StateCounts{"queued": 1}, cs[2].Counts)
	require.EqualValues(t, 2500, cs[2].TotalAudioMs)
	require.Zero(t, cs[2].DoneAudioMs)
}

func TestFailedLines(t *testing.T) {
	t.Parallel()
	f := setupDashboard(t)
	failed, err := f.store.FailedLines(context.Background(), f.p.ID, 10)
	require.NoError(t, err)
	require.Len(t, failed, 2)

	require.Equal(t, f.lines[3].ID, failed[0].LineID, "the latest failure first")
	require.Equal(t, 4, failed[0].Idx)
	require.JSONEq(t, `{"key":"error.internal"}`, failed[0].LastError)
	require.Equal(t, 2, failed[0].Attempts)
	require.Equal(t, "Bob", failed[0].CharacterName)
	require.True(t, failed[0].FailedAt.Equal(f.now.Add(-time.Minute)))

	require.Equal(t, f.lines[2].ID, failed[1].LineID)
	require.Equal(t, "model host crashed", failed[1].LastError)
	require.Equal(t, 3, failed[1].Attempts)
	require.Equal(t, "Alice", failed[1].CharacterName)
	require.Equal(t, f.lines[2].Text, failed[1].Text)

	one, err := f.store.FailedLines(context.Background(), f.p.ID, 1)
	require.NoError(t, err)
	require.Len(t, one, 1)
}

func TestThroughputByMinute(t *testing.T) {
	t.Parallel()
	f := setupDashboard(t)
	pts, err := f.store.ThroughputByMinute(context.Background(), f.p.ID, studio.DashboardParams{Now: f.now, Window: time.Hour})
	require.NoError(t, err)
	require.Len(t, pts, 60)
	require.True(t, pts[59].Minute.Equal(f.now.Truncate(time.Minute)), "the minute in progress last")
	require.True(t, pts[0].Minute.Equal(f.now.Truncate(time.Minute).Add(-59*time.Minute)))

	busy := map[int]studio.ThroughputPoint{}
	for i, p := range pts {
		if p.Takes > 0 {
			busy[i] = p
		}
	}
	// now-1min, now-5min and now-20min; not the take after now nor the other project's.
	require.Len(t, busy, 3)
	require.EqualValues(t, 1500, busy[58].AudioMs)
	require.EqualValues(t, 1500, busy[54].AudioMs)
	require.EqualValues(t, 1400, busy[39].AudioMs)
	require.Equal(t, 1, busy[39].Takes)
}
