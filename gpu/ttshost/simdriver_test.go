package ttshost_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/gpu"
	"dubstudio/gpu/ttshost"
	"dubstudio/internal/simdev"
)

func TestSimDriverFeedsTheMonitor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dev := simdev.New(24 * gpu.GiB)
	m := gpu.NewMonitor(ctx, gpu.MonitorConfig{Driver: ttshost.NewSimDriver(ttshost.SimDevice{UUID: "GPU-sim-0", Name: "Simulated GPU", Device: dev})})
	require.True(t, m.Available())
	require.Equal(t, []gpu.Device{{Index: 0, UUID: "GPU-sim-0", Name: "Simulated GPU", TotalBytes: 24 * gpu.GiB}}, m.Devices())

	p, err := dev.Spawn(5 * gpu.GiB)
	require.NoError(t, err)
	idle := m.SampleNow(ctx)[0]
	require.Equal(t, 5*gpu.GiB, idle.UsedBytes)
	require.Zero(t, idle.GPUPercent)
	used, ok := idle.ProcessBytes(p.PID())
	require.True(t, ok)
	require.Equal(t, 5*gpu.GiB, used)

	require.NoError(t, p.Alloc(gpu.GiB))
	busy := m.SampleNow(ctx)[0]
	require.Positive(t, busy.GPUPercent)
	require.Greater(t, busy.TemperatureC, idle.TemperatureC)
	require.Greater(t, busy.PowerWatts, idle.PowerWatts)
	require.Zero(t, busy.Missing)

	pt := gpu.PointOf(busy)
	require.Equal(t, busy.Time.UnixMilli(), pt.T)
	require.True(t, pt.Has(gpu.MetricPower))
	b, err := json.Marshal(pt)
	require.NoError(t, err)
	require.Contains(t, string(b), `"used":6442450944`)
}
