package gpu

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNewMonitorOnThisMachine runs the real driver path: on a machine without an
// NVIDIA driver (or built without cgo) it must report no GPU without crashing; on a
// machine with one it must list the devices.
func TestNewMonitorOnThisMachine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := NewMonitor(ctx, MonitorConfig{})
	if m.Available() {
		devs := m.Devices()
		require.NotEmpty(t, devs)
		samples := m.SampleNow(ctx)
		require.Len(t, samples, len(devs))
		for _, s := range samples {
			t.Logf("GPU %d %s: used %d of %d, %d%%, %d°C, %.0f W, %d processes, missing %b",
				s.Index, s.UUID, s.UsedBytes, s.TotalBytes, s.GPUPercent, s.TemperatureC,
				s.PowerWatts, len(s.Processes), s.Missing)
			require.True(t, s.Has(MetricMemory))
			require.Positive(t, s.TotalBytes)
		}
		require.NoError(t, m.Close())
		return
	}
	require.ErrorIs(t, m.Err(), ErrNoGPU)
	require.Empty(t, m.Devices())
	require.Nil(t, m.SampleNow(ctx))
	require.NoError(t, m.Run(ctx), "Run returns at once without a GPU")
	ch, stop := m.Subscribe()
	_, open := <-ch
	require.False(t, open)
	stop()
	require.NoError(t, m.Close())
}

// fakeDriver is a hand-written Driver for monitor logic that does not depend on NVML.
type fakeDriver struct {
	initErr   error
	initPanic bool
	devices   []*fakeDevice
}

func (f *fakeDriver) Init() error {
	if f.initPanic {
		panic("boom")
	}
	return f.initErr
}
func (f *fakeDriver) Shutdown() error           { return nil }
func (f *fakeDriver) DeviceCount() (int, error) { return len(f.devices), nil }
func (f *fakeDriver) Device(i int) (DeviceReader, error) {
	return f.devices[i], nil
}

type fakeDevice struct {
	mu   sync.Mutex
	uuid string
	used int64
	lost bool
}

func (d *fakeDevice) setUsed(b int64)       { d.mu.Lock(); d.used = b; d.mu.Unlock() }
func (d *fakeDevice) UUID() (string, error) { return d.uuid, nil }
func (d *fakeDevice) Name() (string, error) { return "Fake", nil }
func (d *fakeDevice) Memory() (MemoryInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lost {
		return MemoryInfo{}, ErrGPULost
	}
	return MemoryInfo{Total: 100, Used: d.used, Free: 100 - d.used}, nil
}
func (d *fakeDevice) Utilization() (Utilization, error) { return Utilization{GPU: 50}, nil }
func (d *fakeDevice) Temperature() (int, error)         { return 0, ErrNotSupported }
func (d *fakeDevice) PowerMilliwatts() (int, error)     { return 150_000, nil }
func (d *fakeDevice) ComputeProcesses() ([]ProcessMemory, error) {
	return []ProcessMemory{{PID: 7, UsedBytes: 40}}, nil
}

func TestMonitorInitPanicIsNoGPU(t *testing.T) {
	t.Parallel()
	m := NewMonitor(context.Background(), MonitorConfig{Driver: &fakeDriver{initPanic: true}})
	require.False(t, m.Available())
	require.ErrorIs(t, m.Err(), ErrNoGPU)
}

func TestMonitorNoDevicesIsNoGPU(t *testing.T) {
	t.Parallel()
	m := NewMonitor(context.Background(), MonitorConfig{Driver: &fakeDriver{}})
	require.False(t, m.Available())
	require.ErrorIs(t, m.Err(), ErrNoGPU)
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestMonitorRingHistoryAndSubscribe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dev := &fakeDevice{uuid: "GPU-a"}
	clock := &fakeClock{t: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	m := NewMonitor(ctx, MonitorConfig{
		Driver: &fakeDriver{devices: []*fakeDevice{dev}}, Interval: time.Second,
		Window: 5 * time.Second, Now: clock.now,
	})
	require.True(t, m.Available())
	ch, stop := m.Subscribe()
	defer stop()

	for i := range 8 {
		dev.setUsed(int64(10 + i))
		m.SampleNow(ctx)
		clock.add(time.Second)
	}
	got := <-ch
	require.Len(t, got, 1)
	require.EqualValues(t, 17, got[0].UsedBytes)
	require.False(t, got[0].Has(MetricTemperature))
	require.True(t, got[0].Has(MetricPower))
	require.InDelta(t, 150.0, got[0].PowerWatts, 1e-9)

	hist := m.History("GPU-a", time.Time{})
	require.Len(t, hist, 5, "the ring keeps Window/Interval samples")
	require.EqualValues(t, 13, hist[0].UsedBytes)
	require.EqualValues(t, 17, hist[4].UsedBytes)
	require.Len(t, m.History("GPU-a", hist[3].Time), 2)
	require.Nil(t, m.History("GPU-x", time.Time{}))

	used, ok := m.ProcessBytes("GPU-a", 7)
	require.True(t, ok)
	require.EqualValues(t, 40, used)
	_, ok = m.ProcessBytes("GPU-a", 8)
	require.False(t, ok)

	dev.mu.Lock()
	dev.lost = true
	dev.mu.Unlock()
	s := m.SampleNow(ctx)
	require.True(t, s[0].Lost)
	require.True(t, m.Devices()[0].Lost)
	require.NoError(t, m.Close())
	require.Nil(t, m.SampleNow(ctx))
}

func TestMonitorRunStopsWithContext(t *testing.T) {
	t.Parallel()
	dev := &fakeDevice{uuid: "GPU-a"}
	m := NewMonitor(context.Background(), MonitorConfig{
		Driver: &fakeDriver{devices: []*fakeDevice{dev}}, Interval: time.Millisecond,
	})
	ch, _ := m.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	<-ch // at least one round was sampled
	cancel()
	require.NoError(t, <-done)
	for range ch { // Close ends subscriptions
	}
}

func TestDownsample(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	mk := func(sec int, uuid string, idx int, used int64, util, temp int, watts float64) Sample {
		return Sample{Time: t0.Add(time.Duration(sec) * time.Second), UUID: uuid, Index: idx,
			TotalBytes: 1000, UsedBytes: used, GPUPercent: util, TemperatureC: temp, PowerWatts: watts}
	}
	noTemp := mk(30, "b", 1, 500, 10, 0, 100)
	noTemp.Missing = MetricTemperature
	samples := []Sample{
		mk(0, "a", 0, 100, 10, 40, 100),
		mk(20, "a", 0, 300, 30, 60, 200),
		mk(59, "a", 0, 200, 20, 50, 300),
		mk(60, "a", 0, 900, 90, 80, 400), // next minute
		{Time: t0.Add(61 * time.Second), UUID: "a", Index: 0, Lost: true},
		mk(10, "b", 1, 500, 10, 70, 100),
		noTemp,
	}
	got := Downsample(samples, 0)
	require.Len(t, got, 3)

	a0 := got[0]
	require.Equal(t, "a", a0.UUID)
	require.Equal(t, t0, a0.Start)
	require.Equal(t, time.Minute, a0.Period)
	require.Equal(t, 3, a0.Samples)
	require.EqualValues(t, 200, a0.AvgUsedBytes)
	require.EqualValues(t, 300, a0.MaxUsedBytes)
	require.InDelta(t, 20.0, a0.AvgGPUPercent, 1e-9)
	require.Equal(t, 30, a0.MaxGPUPercent)
	require.InDelta(t, 50.0, a0.AvgTemperatureC, 1e-9)
	require.Equal(t, 60, a0.MaxTemperatureC)
	require.InDelta(t, 200.0, a0.AvgPowerWatts, 1e-9)
	require.InDelta(t, 300.0, a0.MaxPowerWatts, 1e-9)

	a1 := got[1]
	require.Equal(t, t0.Add(time.Minute), a1.Start)
	require.Equal(t, 2, a1.Samples)
	require.Equal(t, 1, a1.Lost)
	require.EqualValues(t, 900, a1.AvgUsedBytes)

	b := got[2]
	require.Equal(t, "b", b.UUID)
	require.Equal(t, 2, b.Samples)
	require.InDelta(t, 70.0, b.AvgTemperatureC, 1e-9, "a sample without the metric is not averaged")
}

func TestSafeRecovers(t *testing.T) {
	t.Parallel()
	_, err := safe(func() (int, error) { panic("symbol not found") })
	require.ErrorIs(t, err, ErrNotSupported)
	require.Error(t, safeErr(func() error { return errors.New("x") }))
}
