package migrations_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"dubstudio/internal/testdb"
	"dubstudio/migrations"
)

// TestConcurrencyRenameMigratesStoredJSON: migration 0011 renames the profile's and
// the worker's "slots" to concurrency, and rewrites the calibrations stored in the old
// JSON form, so that the one decoder reads one form; the ephemeral live state goes.
func TestConcurrencyRenameMigratesStoredJSON(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := emptyDatabase(t)
	all, err := migrations.All()
	require.NoError(t, err)
	var rename migrations.Migration
	for _, m := range all {
		switch {
		case m.Version < 11:
			_, err := conn.Exec(ctx, m.SQL)
			require.NoError(t, err, m.Name)
		case m.Version == 11:
			rename = m
		}
	}
	require.NotEmpty(t, rename.SQL, "migration 0011 exists")

	_, err = conn.Exec(ctx, `INSERT INTO gpu_profiles (name, max_slots, reserve_pct, long_text_threshold_sec,
		long_lane_limit, max_gen_seconds, segment_tokens) VALUES ('h200', 4, 15, 15, 2, 30, 120)`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO workers (name, host, pid, slots) VALUES ('w1', 'box', 7, 3)`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO gpu_live (worker, host, state) VALUES ('w1', 'box', '{"gpus": []}')`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO gpu_calibrations (gpu_uuid, profile, status, result) VALUES
		('GPU-a', '{"ID": 1, "Name": "h200", "MaxSlots": 4}', 'done',
		 '{"profile": {"Name": "h200", "MaxSlots": 4}, "recommended_profile": {"Name": "h200", "MaxSlots": 3},
		   "slots_that_fit": 7, "recommended": 3,
		   "verdict": {"Steps": [{"Slots": 1, "Tasks": 8}, {"Slots": 2, "Tasks": 8}], "Recommended": 3},
		   "failures": [{"slots": 4, "bucket": "long", "kind": "oom", "error": "CUDA out of memory"}]}'),
		('GPU-b', '{"Name": "h200", "MaxSlots": 2}', 'failed', NULL),
		('GPU-c', '{"Name": "h200", "MaxSlots": 2}', 'done', '{"verdict": {"Steps": null}, "slots_that_fit": 0}')`)
	require.NoError(t, err)

	_, err = conn.Exec(ctx, rename.SQL)
	require.NoError(t, err)

	var concurrency, lane int
	require.NoError(t, conn.QueryRow(ctx, `SELECT concurrency, long_lane_limit FROM gpu_profiles`).Scan(&concurrency, &lane))
	require.Equal(t, []int{4, 2}, []int{concurrency, lane})
	_, err = conn.Exec(ctx, `UPDATE gpu_profiles SET long_lane_limit = 5`)
	require.ErrorContains(t, err, "gpu_profiles_check", "the lane limit is still bounded by the concurrency")
	var check string
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conname = 'gpu_profiles_concurrency_check'`).Scan(&check))
	require.Equal(t, "CHECK ((concurrency >= 1))", check)
	require.NoError(t, conn.QueryRow(ctx, `SELECT concurrency FROM workers`).Scan(&concurrency))
	require.Equal(t, 3, concurrency)
	var live int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM gpu_live`).Scan(&live))
	require.Zero(t, live, "the live state is republished, not migrated")

	stored := map[string][2]string{}
	rows, err := conn.Query(ctx, `SELECT gpu_uuid, profile::text, coalesce(result::text, '') FROM gpu_calibrations`)
	require.NoError(t, err)
	for rows.Next() {
		var uuid, profile, result string
		require.NoError(t, rows.Scan(&uuid, &profile, &result))
		stored[uuid] = [2]string{profile, result}
	}
	require.NoError(t, rows.Err())
	require.JSONEq(t, `{"ID": 1, "Name": "h200", "Concurrency": 4}`, stored["GPU-a"][0])
	require.JSONEq(t, `{"profile": {"Name": "h200", "Concurrency": 4}, "recommended_profile": {"Name": "h200", "Concurrency": 3},
		"concurrency_that_fits": 7, "recommended": 3,
		"verdict": {"Steps": [{"Concurrency": 1, "Tasks": 8}, {"Concurrency": 2, "Tasks": 8}], "Recommended": 3},
		"failures": [{"concurrency": 4, "bucket": "long", "kind": "oom", "error": "CUDA out of memory"}]}`, stored["GPU-a"][1])
	require.JSONEq(t, `{"Name": "h200", "Concurrency": 2}`, stored["GPU-b"][0])
	require.Empty(t, stored["GPU-b"][1])
	require.JSONEq(t, `{"verdict": {"Steps": null}, "concurrency_that_fits": 0}`, stored["GPU-c"][1])
	for _, s := range stored {
		require.NotContains(t, strings.ToLower(s[0]+s[1]), "slot")
	}
}

// emptyDatabase creates a database with no schema, dropped when t ends, and connects
// to it.
func emptyDatabase(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, testdb.ServerURL())
	require.NoError(t, err)
	defer admin.Close(ctx)
	name := fmt.Sprintf("dubstudio_empty_%d", time.Now().UnixNano())
	_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, testdb.ServerURL())
		require.NoError(t, err)
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		require.NoError(t, err)
	})
	cfg, err := pgx.ParseConfig(testdb.ServerURL())
	require.NoError(t, err)
	cfg.Database = name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, conn.Close(ctx)) })
	return conn
}
