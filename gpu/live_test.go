package gpu

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/gpu/simdev"
	"dubstudio/i18n"
)

func TestSimDriverFeedsTheMonitor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dev := simdev.New(24 * GiB)
	m := NewMonitor(ctx, MonitorConfig{Driver: NewSimDriver(SimDevice{UUID: "GPU-sim-0", Name: "Simulated GPU", Device: dev})})
	require.True(t, m.Available())
	require.Equal(t, []Device{{Index: 0, UUID: "GPU-sim-0", Name: "Simulated GPU", TotalBytes: 24 * GiB}}, m.Devices())

	p, err := dev.Spawn(5 * GiB)
	require.NoError(t, err)
	idle := m.SampleNow(ctx)[0]
	require.EqualValues(t, 5*GiB, idle.UsedBytes)
	require.Zero(t, idle.GPUPercent)
	used, ok := idle.ProcessBytes(p.PID())
	require.True(t, ok)
	require.EqualValues(t, 5*GiB, used)

	require.NoError(t, p.Alloc(GiB))
	busy := m.SampleNow(ctx)[0]
	require.Positive(t, busy.GPUPercent)
	require.Greater(t, busy.TemperatureC, idle.TemperatureC)
	require.Greater(t, busy.PowerWatts, idle.PowerWatts)
	require.Zero(t, busy.Missing)

	pt := PointOf(busy)
	require.Equal(t, busy.Time.UnixMilli(), pt.T)
	require.True(t, pt.Has(MetricPower))
	b, err := json.Marshal(pt)
	require.NoError(t, err)
	require.Contains(t, string(b), `"used":6442450944`)
}

func TestWarningsSurviveJSON(t *testing.T) {
	t.Parallel()
	w := Warning{Key: "gpu.calibration.too_few_runs", Args: []any{"long", 2, 3}}
	b, err := json.Marshal(w)
	require.NoError(t, err)
	var back Warning
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, "Bucket long has 2 runs; at least 3 are needed to trust its peak.", back.In(i18n.EN))

	fit := Warning{Key: "gpu.profile.does_not_fit", Args: []any{5, 1.2, 30, 3.1, 24, 90, 0}}
	require.NotContains(t, fit.In(i18n.ZH), "%!")
	require.Equal(t, []byte{'d', 'f', 's'}, verbsOf("%d%% of %.1f and %s"))
}
