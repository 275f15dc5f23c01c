package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c, err := LoadFrom(env(nil))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8080", c.HTTPAddr)
	require.Equal(t, "http://127.0.0.1:8080", c.BaseURL)
	require.Equal(t, int64(50<<20), c.MaxUploadBytes)
	require.True(t, c.Worker)
	require.True(t, filepath.IsAbs(c.DataDir))
}

func TestAllProblemsReportedTogether(t *testing.T) {
	t.Parallel()
	_, err := LoadFrom(env(map[string]string{
		"DATABASE_URL":   "mysql://x",
		"HTTP_ADDR":      "nope",
		"SESSION_SECRET": "short",
		"MAX_UPLOAD_MB":  "0",
		"MAX_SCRIPT_MB":  "0",
	}))
	require.Error(t, err)
	for _, want := range []string{"DATABASE_URL", "HTTP_ADDR", "SESSION_SECRET=\"***\"", "MAX_UPLOAD_MB", "MAX_SCRIPT_MB"} {
		require.Contains(t, err.Error(), want)
	}
	require.NotContains(t, err.Error(), "short", "secrets are never echoed")
}

// TestBedDuckingSettings: the bed's ducking has documented defaults, takes decimals,
// and a value out of its range is refused with the range in the message.
func TestBedDuckingSettings(t *testing.T) {
	t.Parallel()
	c, err := LoadFrom(env(nil))
	require.NoError(t, err)
	require.Equal(t, []float64{-34, 4, 20, 400}, []float64{c.BedDuckThresholdDB, c.BedDuckRatio, c.BedDuckAttackMs, c.BedDuckReleaseMs})

	c, err = LoadFrom(env(map[string]string{"BED_DUCK_THRESHOLD_DB": "-40.5", "BED_DUCK_RATIO": "2.5",
		"BED_DUCK_ATTACK_MS": "5", "BED_DUCK_RELEASE_MS": "1200"}))
	require.NoError(t, err)
	require.Equal(t, []float64{-40.5, 2.5, 5, 1200}, []float64{c.BedDuckThresholdDB, c.BedDuckRatio, c.BedDuckAttackMs, c.BedDuckReleaseMs})

	_, err = LoadFrom(env(map[string]string{"BED_DUCK_THRESHOLD_DB": "0", "BED_DUCK_RATIO": "0.5",
		"BED_DUCK_ATTACK_MS": "fast", "BED_DUCK_RELEASE_MS": "NaN"}))
	require.Error(t, err)
	for _, want := range []string{
		`BED_DUCK_THRESHOLD_DB="0": must be a number between -60 and -1`,
		`BED_DUCK_RATIO="0.5": must be a number between 1 and 20`,
		`BED_DUCK_ATTACK_MS="fast": must be a number between 1 and 2000`,
		`BED_DUCK_RELEASE_MS="NaN": must be a number between 10 and 9000`,
	} {
		require.Contains(t, err.Error(), want)
	}
}

// TestHostTimeouts: the model hosts' timeouts have documented defaults and refuse
// what is not a duration or is too short to load anything.
func TestHostTimeouts(t *testing.T) {
	t.Parallel()
	c, err := LoadFrom(env(nil))
	require.NoError(t, err)
	require.Equal(t, []time.Duration{10 * time.Minute, 5 * time.Second, 30 * time.Second},
		[]time.Duration{c.HostStartTimeout, c.HostHealthTimeout, c.HostStopTimeout})
	c, err = LoadFrom(env(map[string]string{"HOST_START_TIMEOUT": "30m", "HOST_HEALTH_TIMEOUT": "10s", "HOST_STOP_TIMEOUT": "2m"}))
	require.NoError(t, err)
	require.Equal(t, []time.Duration{30 * time.Minute, 10 * time.Second, 2 * time.Minute},
		[]time.Duration{c.HostStartTimeout, c.HostHealthTimeout, c.HostStopTimeout})
	_, err = LoadFrom(env(map[string]string{"HOST_START_TIMEOUT": "1s", "HOST_HEALTH_TIMEOUT": "soon", "HOST_STOP_TIMEOUT": "0"}))
	require.Error(t, err)
	for _, want := range []string{`HOST_START_TIMEOUT="1s": must be a duration of at least 10s`,
		`HOST_HEALTH_TIMEOUT="soon": must be a duration of at least 1s`, `HOST_STOP_TIMEOUT="0": must be a duration of at least 1s`} {
		require.Contains(t, err.Error(), want)
	}
}

func TestSecretFromFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(path, []byte("0123456789abcdef0123456789abcdef\n"), 0o600))
	c, err := LoadFrom(env(map[string]string{"SESSION_SECRET_FILE": path}))
	require.NoError(t, err)
	require.Equal(t, "0123456789abcdef0123456789abcdef", c.SessionSecret)

	_, err = LoadFrom(env(map[string]string{"SESSION_SECRET_FILE": path, "SESSION_SECRET": "x"}))
	require.ErrorContains(t, err, "both set")
}

// TestHelpListsEachSettingOnceWithItsDefault guards `dubstudio help`: one line per
// setting, one default on it, never an empty one.
func TestHelpListsEachSettingOnceWithItsDefault(t *testing.T) {
	t.Parallel()
	lines := strings.Split(strings.TrimRight(Help(), "\n"), "\n")
	require.Len(t, lines, len(options))
	seen := map[string]bool{}
	for _, l := range lines {
		name := strings.Fields(l)[0]
		require.False(t, seen[name], "%s listed twice", name)
		seen[name] = true
		require.Equal(t, 1, strings.Count(strings.ToLower(l), "default"), "one default on %q", l)
		require.NotContains(t, l, "[default: ]", "an empty default says what it means")
	}
	require.Contains(t, Help(), "BASE_URL")
	require.Regexp(t, `BASE_URL +public URL of the web app, for links printed on the console \[default: http://HTTP_ADDR\]`, Help())
	require.Regexp(t, `HTTP_ADDR +address the web server listens on \[default: 127.0.0.1:8080\]`, Help())
}
