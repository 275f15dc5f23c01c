package studio_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"dubstudio/internal/testdb"
	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// dbAhead is how far the database's clock runs ahead of this process's in
// skewedStore.
const dbAhead = 3 * time.Minute

// skewedStore is a store on a database whose clock, now(), runs dbAhead ahead of the
// process's: a now() in the search path before pg_catalog's answers for it.
func skewedStore(t *testing.T) *studio.Store {
	t.Helper()
	ctx := context.Background()
	url := testdb.URL(t)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `CREATE SCHEMA skew;
		CREATE FUNCTION skew.now() RETURNS timestamptz LANGUAGE sql STABLE
			AS $$ SELECT pg_catalog.now() + interval '`+dbAhead.String()+`' $$`)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["search_path"] = "skew, pg_catalog, public"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s, err := studio.NewStore(pool)
	require.NoError(t, err)
	return s
}

// The throughput window ends at the database's clock, which stamps the takes, not
// at the web server's: with the database a few minutes ahead, the takes of the last
// minutes were "in the future" and the dashboard said nothing was being rendered
// (and no ETA) while lines were finishing.
func TestDashboardThroughputOnTheDatabaseClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := skewedStore(t)
	u := studiotest.User(t, s, studio.RoleEditor)
	p := studiotest.Project(t, s, u, 2)
	lines, err := s.AllLines(ctx, p.ID)
	require.NoError(t, err)
	studiotest.Exec(t, s, `UPDATE lines SET state = 'queued' WHERE id = $1`, lines[1].ID)
	sha := strings.Repeat("d", 64)
	studiotest.Exec(t, s, `INSERT INTO blobs (sha256, size_bytes, format, duration_ms, sample_rate, channels) VALUES ($1, 1, 'wav', 1500, 48000, 1)`, sha)
	// A take rendered a minute ago, as the database tells the time.
	studiotest.Exec(t, s, `INSERT INTO takes (line_id, project_id, revision, render_seq, engine, spoken_text, audio_sha256, duration_ms, created_at)
		VALUES ($1, $2, 1, 1, 'sim', 'x', $3, 1500, now() - interval '1 minute')`, lines[0].ID, p.ID, sha)
	studiotest.Exec(t, s, `UPDATE lines SET state = 'done' WHERE id = $1`, lines[0].ID)

	stats, err := s.ProjectStats(ctx, []int64{p.ID}, studio.DashboardParams{})
	require.NoError(t, err)
	require.Equal(t, 1, stats[p.ID].Recent.Takes, "the take of a minute ago is in the last 15 minutes")
	require.EqualValues(t, 1500, stats[p.ID].Recent.AudioMs)
	_, ok := stats[p.ID].ETA()
	require.True(t, ok)

	pts, err := s.ThroughputByMinute(ctx, p.ID, studio.DashboardParams{Window: time.Hour})
	require.NoError(t, err)
	require.Len(t, pts, 60)
	require.Equal(t, 1, pts[58].Takes, "the take is in the minute before the one in progress")
}
