package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHelpRunsNothing: `migrate --help` used to apply the migrations, `worker --help`
// to start a worker. With DATABASE_URL naming a server that does not exist, any
// command that went on would fail; help must print and return nil.
func TestHelpRunsNothing(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none?sslmode=disable")
	for _, cmd := range []string{"serve", "worker", "gpus", "createdb", "migrate", "user"} {
		for _, h := range []string{"-h", "--help"} {
			require.NoError(t, run(context.Background(), []string{cmd, h}), "%s %s", cmd, h)
		}
	}
	require.Contains(t, commandUsage("user"), "reset-password")
}

// TestUnknownFlagsAndCommandsAreUsageErrors: they exit 2 with the usage.
func TestUnknownFlagsAndCommandsAreUsageErrors(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none?sslmode=disable")
	var ue usageError
	err := run(context.Background(), []string{"migrate", "--bogus"})
	require.ErrorAs(t, err, &ue)
	require.Contains(t, err.Error(), "dubstudio migrate")
	err = run(context.Background(), []string{"frobnicate"})
	require.ErrorAs(t, err, &ue)
	require.Contains(t, err.Error(), "unknown command")
}
