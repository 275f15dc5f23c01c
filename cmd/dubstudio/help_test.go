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

// TestUserCommandLinesAreCheckedFirst: a user command with a missing or unknown
// subcommand, or the wrong number of arguments, is a usage error (exit 2, its usage
// line) before anything touches the database: it used to connect and apply the
// migrations first, so with the database down it reported the database, not the
// typo, and exited 1.
func TestUserCommandLinesAreCheckedFirst(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none?sslmode=disable")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"user"}, "dubstudio user add NAME ROLE"},
		{[]string{"user", "frobnicate"}, "unknown user subcommand"},
		{[]string{"user", "add", "bob"}, "dubstudio user add NAME ROLE"},
		{[]string{"user", "list", "extra"}, "dubstudio user list"},
		{[]string{"user", "set-role", "bob"}, "dubstudio user set-role NAME ROLE"},
		{[]string{"user", "reset-password"}, "dubstudio user reset-password NAME"},
		{[]string{"user", "add", "bob", "emperor"}, "emperor"},
	} {
		err := run(context.Background(), tc.args)
		var ue usageError
		require.ErrorAs(t, err, &ue, "%v", tc.args)
		require.Contains(t, err.Error(), tc.want, "%v", tc.args)
	}
}

// TestCalibrateAndDoctorRefuseWhatTheyDoNotTake: an unknown flag is a usage error
// (exit 2) as for the other commands, and so is an argument that is not a flag:
// `dubstudio calibrate 1` used to calibrate the first GPU, not GPU 1, without a word.
func TestCalibrateAndDoctorRefuseWhatTheyDoNotTake(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none?sslmode=disable")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"calibrate", "--bogus"}, "bogus"},
		{[]string{"calibrate", "1"}, `"1"`},
		{[]string{"calibrate", "-db=false", "1"}, `"1"`},
		{[]string{"doctor", "--bogus"}, "bogus"},
		{[]string{"doctor", "-model-dir", "/nonexistent", "extra"}, `"extra"`},
	} {
		err := run(context.Background(), tc.args)
		var ue usageError
		require.ErrorAs(t, err, &ue, "%v: %v", tc.args, err)
		require.Contains(t, err.Error(), tc.want, "%v", tc.args)
	}
}
