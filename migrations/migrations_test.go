package migrations_test

import (
	"context"
	"log/slog"
	"testing"

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
