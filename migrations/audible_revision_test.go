package migrations_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/migrations"
)

// Migration 0023 recomputes lines.audible_revision from line_history, which 0015 had
// set to the revision: lines edited before 0015 (in the database of 0014, with the
// history the store wrote) get the revision of their last audible change, notes not
// counted, and a line never audibly changed since its creation gets 0.
func TestAudibleRevisionIsRecomputedFromHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := emptyDatabase(t)
	all, err := migrations.All()
	require.NoError(t, err)
	apply := func(from, to int) {
		t.Helper()
		for _, m := range all {
			if m.Version >= from && m.Version < to {
				_, err := conn.Exec(ctx, m.SQL)
				require.NoError(t, err, m.Name)
			}
		}
	}
	apply(0, 15)

	var user, project int64
	require.NoError(t, conn.QueryRow(ctx, `INSERT INTO users (username, role, password_hash)
		VALUES ('ed', 'editor', 'x') RETURNING id`).Scan(&user))
	require.NoError(t, conn.QueryRow(ctx, `INSERT INTO projects (name, created_by) VALUES ('Pilot', $1) RETURNING id`,
		user).Scan(&project))
	// A line's snapshot as the store writes it into its history.
	snap := func(text, notes string, endMs int, lock bool, emotion string) string {
		return fmt.Sprintf(`{"text": %q, "character_id": null, "emotion": %s, "notes": %q, "start_ms": 0, "end_ms": %d, "duration_lock": %t}`,
			text, emotion, notes, endMs, lock)
	}
	angry := `{"mode": "text", "text": "angry"}`
	a1 := snap("Hello.", "", 1000, true, "null")
	a2 := snap("Hello.", "breathe first", 1000, true, "null")
	a3 := snap("Hello there.", "breathe first", 1000, true, "null")
	a4 := snap("Hello there.", "breathe first", 1200, true, "null")
	a5 := snap("Hello there.", "louder", 1200, true, "null")
	a6 := snap("Hello there.", "louder", 1200, true, angry)
	a7 := snap("Hello there.", "quieter", 1200, true, angry)
	a8 := snap("Hello there.", "quieter", 1200, false, angry)
	type change struct{ before, after string } // no before: the line's creation
	cases := []struct {
		name     string
		history  []change
		revision int
		want     int
	}{
		{"notes only", []change{{"", a1}, {a1, a2}}, 2, 0},
		{"text, notes, a save that changed nothing", []change{{"", a1}, {a1, a2}, {a2, a3}, {a3, a3}}, 4, 3},
		{"slot, notes, emotion, notes", []change{{"", a3}, {a3, a4}, {a4, a5}, {a5, a6}, {a6, a7}}, 5, 4},
		{"the duration lock last", []change{{"", a7}, {a7, a8}}, 2, 2},
		{"created, nothing since", []change{{"", a1}}, 1, 0},
		{"no history: left as it is", nil, 5, 5},
		{"merged away", []change{{"", a1}, {a1, a3}}, 2, -1},
	}
	ids := make([]int64, len(cases))
	for i, c := range cases {
		require.NoError(t, conn.QueryRow(ctx, `INSERT INTO lines (project_id, idx, start_ms, end_ms, text, revision)
			VALUES ($1, $2, 0, 1000, 'Hello.', $3) RETURNING id`, project, i+1, c.revision).Scan(&ids[i]))
	}
	// The lines' histories interleaved, as edits of several lines come.
	for step := range 5 {
		for i, c := range cases {
			if step >= len(c.history) {
				continue
			}
			var before *string
			if h := c.history[step]; h.before != "" {
				before = &h.before
			}
			_, err := conn.Exec(ctx, `INSERT INTO line_history (line_id, project_id, user_id, action, before, after)
				VALUES ($1, $2, $3, 'edit', $4, $5)`, ids[i], project, user, before, c.history[step].after)
			require.NoError(t, err, c.name)
		}
	}
	_, err = conn.Exec(ctx, `DELETE FROM lines WHERE id = $1`, ids[len(ids)-1])
	require.NoError(t, err)
	cases = cases[:len(cases)-1]

	apply(15, 23)
	for i, c := range cases {
		var audible int
		require.NoError(t, conn.QueryRow(ctx, `SELECT audible_revision FROM lines WHERE id = $1`, ids[i]).Scan(&audible))
		require.Equal(t, c.revision, audible, "%s: 0015 counted every edit", c.name)
	}

	apply(23, 24)
	for i, c := range cases {
		var audible int
		require.NoError(t, conn.QueryRow(ctx, `SELECT audible_revision FROM lines WHERE id = $1`, ids[i]).Scan(&audible))
		require.Equal(t, c.want, audible, c.name)
	}
}

// 0023 indexes the user columns of 0012's tables that a user's deletion sets to NULL,
// and gives a profile's beams its one default form, 0 (gpu.Profile.BeamsOrDefault).
func TestUserColumnsIndexedAndBeamsDefaultZero(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := emptyDatabase(t)
	all, err := migrations.All()
	require.NoError(t, err)
	for _, m := range all {
		_, err := conn.Exec(ctx, m.SQL)
		require.NoError(t, err, m.Name)
	}
	for _, c := range [][2]string{{"project_members", "added_by"},
		{"project_member_history", "user_id"}, {"project_member_history", "by_user"}} {
		table, column := c[0], c[1]
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_index i
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
			WHERE i.indrelid = $1::regclass AND a.attname = $2`, table, column).Scan(&n))
		require.Equal(t, 1, n, "%s.%s leads an index", table, column)
	}
	var beams int
	require.NoError(t, conn.QueryRow(ctx, `INSERT INTO gpu_profiles (name, concurrency, reserve_pct,
		long_text_threshold_sec, long_lane_limit, max_gen_seconds, segment_tokens) VALUES ('new', 4, 15, 15, 2, 30, 120)
		RETURNING beams`).Scan(&beams))
	require.Zero(t, beams)
}
