package migrations_test

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"dubstudio/internal/testdb"
	"dubstudio/migrations"
)

func TestApplyIsIdempotent(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t) // already migrated from the template
	ctx := context.Background()
	require.NoError(t, migrations.Apply(ctx, pool, slog.New(slog.DiscardHandler)))

	all, err := migrations.All()
	require.NoError(t, err)
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM schema_migrations").Scan(&n))
	require.Equal(t, len(all), n)
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM river_job").Scan(&n), "River's tables exist")
}

// 0016 adds a take's usage columns and its down file takes them away again, after
// which the up file applies once more: both files are kept true to each other.
func TestTakeUsageMigrationUpAndDown(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := context.Background()
	columns := func() []string {
		rows, err := pool.Query(ctx, `SELECT column_name FROM information_schema.columns
			WHERE table_name = 'takes' AND column_name IN ('predicted_vram_bytes', 'measured_vram_bytes', 'kv_bytes',
				'activation_bytes', 'permit_wait_ms', 'host_queue_ms', 'gpt_ms', 's2mel_ms', 'vocoder_ms',
				'batch_rows_mean', 's2mel_group', 'gpu_index') ORDER BY column_name`)
		require.NoError(t, err)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return names
	}
	require.Len(t, columns(), 12, "applied with the others")
	down, err := os.ReadFile("0016_take_usage.down.sql")
	require.NoError(t, err)
	up, err := os.ReadFile("0016_take_usage.up.sql")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, string(down))
	require.NoError(t, err)
	require.Empty(t, columns())
	_, err = pool.Exec(ctx, string(up))
	require.NoError(t, err)
	require.Len(t, columns(), 12)
}
