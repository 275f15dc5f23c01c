package migrations

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMigrationLogsAtDebug: a migration's info records (River's included) appear only
// at LOG_LEVEL=debug, and then as debug records; warnings stay warnings.
func TestMigrationLogsAtDebug(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	info := slog.New(debugHandler{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})})
	info.Info("applied migration", "name", "0001_foundation.up.sql")
	require.Empty(t, buf.String())
	info.With("component", "rivermigrate").Warn("slow migration")
	require.Contains(t, buf.String(), "level=WARN")
	require.Contains(t, buf.String(), "component=rivermigrate")

	buf.Reset()
	debug := slog.New(debugHandler{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})})
	debug.Info("applied migration", "name", "0001_foundation.up.sql")
	require.Contains(t, buf.String(), "level=DEBUG")
	require.Contains(t, buf.String(), "0001_foundation.up.sql")
}
